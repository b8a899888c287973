package org.crossdock.mapreduce;

import java.io.IOException;

/**
 * A position in one sorted run of serialized records: the current record's key and value are
 * {@code buf[keyOff, keyOff + keyLen)} and {@code buf[valOff, valOff + valLen)} after {@link
 * #advance} returned true, until the cursor's next {@code advance} (a cursor may reuse its
 * buffer): a merge hands a record out and advances its run only when asked for the next one.
 */
abstract class RecordCursor {
  byte[] buf;
  int keyOff;
  int keyLen;
  int valOff;
  int valLen;

  /** Moves to the run's next record; false at its end. */
  abstract boolean advance() throws IOException;

  /** Gives back what the cursor holds (streams, buffers); it is not used after. */
  void close() throws IOException {}
}
