-- pva trace file, format 1.1: the SQLite DDL the writers execute (normative).
--
-- A trace file holds host-side events (libpva TraceReport): processes own threads, threads own
-- events, and events nest through their parent. It is written either all at once by a converter
-- (formats.trace.writer.TraceWriter, renamed into place when complete) or incrementally by the
-- tracing API (formats.trace.tracing, pva.tracing), which commits a batch of events at a time so that
-- a process that dies leaves a readable trace.
--
-- Conventions
--   * Times are in microseconds of a steady (monotonic) clock, unless a comment says otherwise:
--     they are comparable within one trace file, not between files.
--   * Event ids are unique in the file and grow in the order events begin; a parent's id is
--     smaller than its children's.
--   * A table comment is the block of "--" lines right above CREATE TABLE; a column comment is
--     the "--" text at the end of its line.

-- Key/value facts about the file: format_version (major.minor), producer, producer_version,
-- created (ISO 8601, UTC), clock (steady), state (recording while a recorder is writing, complete
-- once it closed), last_timestamp (the latest time a recorder committed, in microseconds); from a
-- Chrome trace also source_format, chrome_trace_fields (its top-level keys but traceEvents, as a
-- JSON object), time_origin_ns (baseTimeNanoseconds: the wall-clock time of timestamp 0, in
-- nanoseconds since the Unix epoch) and display_time_unit (displayTimeUnit: ms, us or ns).
CREATE TABLE metadata (
  key TEXT PRIMARY KEY NOT NULL,  -- name of the fact
  value TEXT  -- value of the fact, as text
);

-- Processes of the trace (libpva Process).
CREATE TABLE processes (
  pid INTEGER PRIMARY KEY NOT NULL,  -- process id
  name TEXT NOT NULL DEFAULT '',  -- process name; may be empty
  sort_index INTEGER,  -- display order hint (Chrome trace process_sort_index); NULL if none
  labels TEXT  -- labels of the process (Chrome trace process_labels, e.g. "GPU 0"); NULL if none (format 1.1)
);

-- Threads of each process (libpva Thread).
CREATE TABLE threads (
  pid INTEGER NOT NULL,  -- owning process
  tid INTEGER NOT NULL,  -- thread id, unique within its process
  name TEXT NOT NULL DEFAULT '',  -- thread name; may be empty
  sort_index INTEGER,  -- display order hint (Chrome trace thread_sort_index); NULL if none
  PRIMARY KEY (pid, tid)
) WITHOUT ROWID;

-- Named channels events are recorded on (Event.channel), e.g. one per library or subsystem.
CREATE TABLE channels (
  id INTEGER PRIMARY KEY NOT NULL,  -- channel id
  name TEXT NOT NULL UNIQUE  -- channel name; may be empty
);

-- Events of every thread (libpva Event), clustered by thread so one thread's events are read
-- in one sequential range. An event still open when its recorder stopped has complete = 0.
CREATE TABLE events (
  pid INTEGER NOT NULL,  -- process of the thread the event occurred on
  tid INTEGER NOT NULL,  -- thread the event occurred on
  id INTEGER NOT NULL,  -- event id, unique in the file
  parent INTEGER,  -- id of the enclosing event on the same thread; NULL for a root event
  label TEXT NOT NULL,  -- event label
  channel INTEGER NOT NULL,  -- channels.id
  timestamp INTEGER NOT NULL,  -- start [microseconds]
  duration INTEGER,  -- time from start to end [microseconds]; NULL while open
  complete INTEGER NOT NULL DEFAULT 1,  -- 1 if the event ended; 0 if it was still open
  PRIMARY KEY (pid, tid, id)
) WITHOUT ROWID;

-- Arguments of events that have some (Chrome trace "args"), as a JSON object.
CREATE TABLE event_args (
  event INTEGER PRIMARY KEY NOT NULL,  -- events.id
  args TEXT NOT NULL  -- JSON object, e.g. {"total_cycle": 1200, "conv_cycle_percent": 61.5}
);

-- Each thread's events again, as one Arrow IPC stream written when the writer finishes, so that
-- a reader loads a thread in one step. Table events stays authoritative: a reader ignores a
-- stream whose num_events disagrees with it; threads of a trace whose recorder did not finish,
-- and threads of 64 events or fewer written by `pva convert`, have none (read them from events). The stream (uncompressed) has one record batch with the columns id
-- (int64), parent (int64, -2**63 for none), label (dictionary<int32, utf8>), channel (int64),
-- timestamp (int64), duration (int64, -2**63 while open) and complete (int8), in id order.
CREATE TABLE thread_event_columns (
  pid INTEGER NOT NULL,  -- process of the thread
  tid INTEGER NOT NULL,  -- thread
  num_events INTEGER NOT NULL,  -- events of the thread: rows of the stream
  data BLOB NOT NULL,  -- the Arrow IPC stream
  PRIMARY KEY (pid, tid)
);

-- Samples of counters (Chrome trace "C" events, libpvti graph series), per process.
CREATE TABLE counter_samples (
  pid INTEGER NOT NULL,  -- process the counter belongs to
  name TEXT NOT NULL,  -- counter name
  series TEXT NOT NULL DEFAULT '',  -- series within the counter; '' for a single series
  timestamp INTEGER NOT NULL,  -- time of the sample [microseconds]
  value REAL NOT NULL  -- sampled value
);

-- Flows between events (Chrome trace flow events s/t/f and bind_id), format 1.1: a row links two
-- events, such as the CPU launch of a kernel and the kernel on its GPU stream. A flow of n points
-- (a start, steps, an end) is n - 1 rows. An event is the one the point binds to: the innermost
-- event enclosing the point's time on its thread, or for an end without "bp": "e" the next event
-- starting on that thread; NULL where the thread has none.
CREATE TABLE flows (
  id INTEGER PRIMARY KEY NOT NULL,  -- row id, in order of the flows' ids in the trace, then of their points
  flow_id TEXT NOT NULL,  -- the flow's id in the trace (Chrome id or bind_id), as text
  category TEXT NOT NULL DEFAULT '',  -- the flow's category (Chrome cat), e.g. ac2g
  name TEXT NOT NULL DEFAULT '',  -- the flow's name
  source INTEGER,  -- events.id of the event the flow leaves; NULL if no event is there
  target INTEGER,  -- events.id of the event the flow arrives at; NULL if no event is there
  source_pid INTEGER NOT NULL,  -- process of the source point
  source_tid INTEGER NOT NULL,  -- thread of the source point (the source event's thread)
  source_timestamp INTEGER NOT NULL,  -- time of the source point [microseconds]
  target_pid INTEGER NOT NULL,  -- process of the target point
  target_tid INTEGER NOT NULL,  -- thread of the target point (the target event's thread)
  target_timestamp INTEGER NOT NULL  -- time of the target point [microseconds]
);

-- Indexes the reader and SQL users rely on.
CREATE UNIQUE INDEX events_by_id ON events (id);
CREATE INDEX counter_samples_by_name ON counter_samples (pid, name, series, timestamp);
CREATE INDEX flows_by_source ON flows (source);
CREATE INDEX flows_by_target ON flows (target);
