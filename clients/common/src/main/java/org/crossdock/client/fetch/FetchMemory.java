package org.crossdock.client.fetch;

/**
 * Where a reader's buffers get their memory: an engine's memory manager, so its own accounting
 * sees what the reader holds (Spark: the task's memory manager). A grant may be smaller than
 * asked; the reader then asks for less at once.
 */
public interface FetchMemory {
  /** Takes up to {@code bytes}; returns how many were granted. */
  long acquire(long bytes);

  /** Gives back {@code bytes} taken before. */
  void release(long bytes);

  /** No accounting: every request is granted. */
  FetchMemory UNLIMITED = new FetchMemory() {
    @Override
    public long acquire(long bytes) {
      return bytes;
    }

    @Override
    public void release(long bytes) {}
  };
}
