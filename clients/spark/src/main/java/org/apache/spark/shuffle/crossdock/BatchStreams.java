package org.apache.spark.shuffle.crossdock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import org.apache.spark.SparkEnv;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.storage.BlockId;
import org.crossdock.client.BufferStream;

/** Fetched batches as the input streams Spark's serializers read. */
final class BatchStreams {
  private BatchStreams() {}

  /**
   * One map's batches when each batch is its own wrapped frame ({@link CrossdockDirectWriter}):
   * every frame is unwrapped (decrypted, decompressed) on its own and the results are
   * concatenated into one stream of serialized records.
   */
  static final class FramedStream extends InputStream {
    private final BufferStream batches;
    private final BlockId blockId;
    private final SerializerManager serializerManager = SparkEnv.get().serializerManager();
    private InputStream frame;

    FramedStream(BufferStream batches, BlockId blockId) {
      this.batches = batches;
      this.blockId = blockId;
    }

    private InputStream frame() throws IOException {
      if (frame == null) {
        ByteBuffer b = batches.nextBatch();
        if (b == null) {
          return null;
        }
        frame = serializerManager.wrapStream(blockId, BufferStream.of(b));
      }
      return frame;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      int n = read(one, 0, 1);
      return n < 0 ? -1 : (one[0] & 0xff);
    }

    @Override
    public int read(byte[] out, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      while (true) {
        InputStream f = frame();
        if (f == null) {
          return -1;
        }
        int n = f.read(out, off, len);
        if (n > 0) {
          return n;
        }
        if (n < 0) {
          f.close();
          frame = null;
        }
      }
    }
  }
}
