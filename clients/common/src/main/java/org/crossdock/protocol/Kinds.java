package org.crossdock.protocol;

/**
 * The kind byte of every message (docs/protocol.md, "Messages"). {@link Message} extends this
 * interface, so each is named as a member of it ({@code Message.KIND_FETCH}); it lives apart
 * only to keep the message file readable.
 */
public interface Kinds {
  int KIND_OK = 0x01;
  int KIND_ERROR = 0x02;
  int KIND_HELLO = 0x03;
  int KIND_CHALLENGE = 0x04;
  int KIND_AUTHENTICATE = 0x05;
  int KIND_REGISTER_APP = 0x10;
  int KIND_RENEW_LEASE = 0x11;
  int KIND_UNREGISTER_APP = 0x12;
  int KIND_REGISTER_SHUFFLE = 0x13;
  int KIND_SHUFFLE_PLACEMENT = 0x14;
  int KIND_COMMIT_MAP = 0x15;
  int KIND_COMMIT_RESULT = 0x16;
  int KIND_UNREGISTER_SHUFFLE = 0x17;
  int KIND_GET_SHUFFLE_STATUS = 0x18;
  int KIND_SHUFFLE_STATUS = 0x19;
  int KIND_REPORT_WORKER_FAILURE = 0x1A;
  int KIND_REPORT_LOST_COPY = 0x1B;
  int KIND_REGISTER_WORKER = 0x20;
  int KIND_WORKER_REGISTERED = 0x21;
  int KIND_HEARTBEAT = 0x22;
  int KIND_PREPARE_SHUFFLE = 0x30;
  int KIND_MAP_COMMITTED = 0x31;
  int KIND_DELETE_SHUFFLE = 0x32;
  int KIND_DELETE_APP = 0x33;
  int KIND_SYNC_COMMITS = 0x34;
  int KIND_CHECK_COPIES = 0x35;
  int KIND_COPIES_HELD = 0x36;
  int KIND_PUSH_BATCH = 0x40;
  int KIND_FETCH = 0x41;
  int KIND_FETCH_CHUNK = 0x42;
  int KIND_FETCH_END = 0x43;
  int KIND_APP_REGISTERED = 0x1C;
  int KIND_SPLIT_PARTITION = 0x1D;
  int KIND_PARTITION_SPLIT = 0x1E;
  int KIND_GET_WORKER_STATS = 0x44;
  int KIND_WORKER_STATS = 0x45;
  int KIND_PUSH_REDIRECT = 0x46;
  int KIND_FETCH_RECORDS = 0x47;
}
