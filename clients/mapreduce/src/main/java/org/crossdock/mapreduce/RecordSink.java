package org.crossdock.mapreduce;

import java.io.IOException;

/** Where a map's sorted records of one partition go: a spill file, or batches pushed. */
@FunctionalInterface
interface RecordSink {
  /** Takes the record {@code b[keyOff, +keyLen)}, {@code b[valOff, +valLen)}; copies what it keeps. */
  void write(byte[] b, int keyOff, int keyLen, int valOff, int valLen) throws IOException;
}
