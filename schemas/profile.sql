-- profile.pop, format 1.0: the SQLite DDL the writer executes (normative).
--
-- Conventions
--   * Ids are dense, 0-based integers unless a comment says otherwise.
--   * Sizes are in bytes, times in tile clock cycles, unless a comment says otherwise.
--   * A column named *_row holds a row number of a per-tile matrix stored as Arrow data in
--     matrix_chunks (see schemas/profile_matrices.json); NULL means "no vector" (an empty list).
--   * Compilation per-tile data (memory, estimates, code sizes) covers the tiles of one replica
--     (target.tiles_per_replica); execution per-tile data covers every tile (target.num_tiles).
--   * A table comment is the block of "--" lines right above CREATE TABLE; a column comment is
--     the "--" text at the end of its line. `pva tables` shows them.

-- Key/value facts about the file: format_version (major.minor), producer, producer_version,
-- created (ISO 8601, UTC), poplar_version ("3.1.0 (a027fa0bd5)"), instrumentation_compute,
-- instrumentation_external_exchange, compilation_timestamp and report_unstable; optionally
-- program_name (the program or preset that ran), debug_info_id (digest of the debug.cbor written
-- with the report), not_recorded (JSON array of "table.column" whose stored value is a placeholder
-- because the source did not record it), memory_totals (JSON: device-wide memory figures of a
-- converted text summary, in bytes) and legacy_step_cycles_by_tile (set when per-step tile cycles
-- were shared out of a legacy computeSetCyclesByTile).
CREATE TABLE metadata (
  key TEXT PRIMARY KEY NOT NULL,  -- name of the fact
  value TEXT  -- value of the fact, as text
);

-- The target hardware (libpva Target); exactly one row.
CREATE TABLE target (
  type TEXT NOT NULL,  -- Target.Type: Ipu, IpuModel, Cpu or Unknown
  architecture TEXT NOT NULL,  -- IPU.Architecture: Ipu1, Ipu2, Ipu21, Ipu30 or Unknown
  num_ipus INTEGER NOT NULL,  -- IPU chips in the system, all replicas included
  tiles_per_ipu INTEGER NOT NULL,  -- tiles on each IPU chip
  num_tiles INTEGER NOT NULL,  -- num_ipus * tiles_per_ipu
  bytes_per_tile INTEGER NOT NULL,  -- memory on one tile [bytes]
  bytes_per_ipu INTEGER NOT NULL,  -- memory on one IPU [bytes]
  total_memory INTEGER NOT NULL,  -- bytes_per_tile * num_tiles [bytes]
  clock_frequency REAL NOT NULL,  -- tile clock [Hz]
  num_replicas INTEGER NOT NULL,  -- number of replicas
  ipus_per_replica INTEGER NOT NULL,  -- IPUs in one replica
  tiles_per_replica INTEGER NOT NULL,  -- tiles in one replica
  memory_per_replica INTEGER NOT NULL,  -- memory of one replica [bytes]
  min_sync_delay INTEGER NOT NULL DEFAULT 0,  -- minimum sync delay of any tile [cycles]
  supervisor_instr_fetch_delay INTEGER NOT NULL DEFAULT 0,  -- delay of a supervisor instruction fetch [cycles]
  interleaved_memory_start INTEGER NOT NULL DEFAULT 0,  -- start address of interleaved memory [bytes]
  memory_element_offsets TEXT NOT NULL DEFAULT '[]',  -- JSON array: offset of each memory element [bytes]
  memory_region_offsets TEXT NOT NULL DEFAULT '[]',  -- JSON array: offset of each memory region [bytes]
  tile_memory_base_address INTEGER NOT NULL DEFAULT 0,  -- physical address where tile memory starts
  tiles_per_super_tile INTEGER NOT NULL DEFAULT 0,  -- tiles per supertile; 0 when unknown
  num_worker_contexts INTEGER NOT NULL DEFAULT 0,  -- worker contexts (hardware threads) per tile; 0 when unknown
  exchange_bytes_per_cycle INTEGER NOT NULL DEFAULT 0,  -- internal exchange bandwidth [bytes/cycle]; 0 when unknown
  memcpy_bytes_per_cycle INTEGER NOT NULL DEFAULT 0,  -- memcpy bandwidth [bytes/cycle]; 0 when unknown
  instruction_bytes INTEGER NOT NULL DEFAULT 0,  -- size of an instruction [bytes]; 0 when unknown
  supports_super_tile_send_receive INTEGER NOT NULL DEFAULT 0,  -- 1 if a supertile tile may use the whole supertile bandwidth
  global_sync_cycles INTEGER NOT NULL DEFAULT 0,  -- cycles to synchronise all IPUs; 0 when unknown
  global_exchange_packet_bytes INTEGER NOT NULL DEFAULT 0,  -- inter-IPU exchange packet size [bytes]; 0 when unknown
  tile_local_sync_sync_delay INTEGER NOT NULL DEFAULT 0,  -- cycles from a sync instruction to resumption; 0 when unknown
  tile_local_sync_exit_delay INTEGER NOT NULL DEFAULT 0,  -- cycles from a worker exit until the supervisor resumes; 0 when unknown
  num_stride_bits INTEGER NOT NULL DEFAULT 0,  -- stride bits; 0 when unknown
  data_path_width INTEGER NOT NULL DEFAULT 0,  -- load/store data path width [bits]; 0 when unknown
  fp8_conv_unit_max_pipeline_depth INTEGER NOT NULL DEFAULT 0,  -- convolution unit pipeline depth for fp8; 0 when unknown
  fp16_conv_unit_max_pipeline_depth INTEGER NOT NULL DEFAULT 0,  -- convolution unit pipeline depth for fp16; 0 when unknown
  fp32_conv_unit_max_pipeline_depth INTEGER NOT NULL DEFAULT 0,  -- convolution unit pipeline depth for fp32; 0 when unknown
  fp8_conv_unit_input_load_elems_per_cycle INTEGER NOT NULL DEFAULT 0,  -- fp8 conv input elements loaded per cycle; 0 when unknown
  fp16_conv_unit_input_load_elems_per_cycle INTEGER NOT NULL DEFAULT 0,  -- fp16 conv input elements loaded per cycle; 0 when unknown
  fp32_conv_unit_input_load_elems_per_cycle INTEGER NOT NULL DEFAULT 0,  -- fp32 conv input elements loaded per cycle; 0 when unknown
  fp16_in_fp16_out_conv_units_per_tile INTEGER NOT NULL DEFAULT 0,  -- conv units usable for fp16 in, fp16 out; 0 when unknown
  fp16_in_fp32_out_conv_units_per_tile INTEGER NOT NULL DEFAULT 0,  -- conv units usable for fp16 in, fp32 out; 0 when unknown
  fp32_in_fp32_out_conv_units_per_tile INTEGER NOT NULL DEFAULT 0,  -- conv units usable for fp32 accumulation; 0 when unknown
  fp8_in_fp16_out_conv_units_per_tile INTEGER NOT NULL DEFAULT 0,  -- conv units usable for fp8 in, fp16 out; 0 when unknown
  conv_unit_coeff_load_bytes_per_cycle INTEGER NOT NULL DEFAULT 0,  -- convolution weights loaded per cycle [bytes]; 0 when unknown
  worker_instr_fetch_delay INTEGER NOT NULL DEFAULT 0,  -- bytes a worker may fetch ahead of its PC [bytes]; 0 when unknown
  max_immediate_offset_in_run_instr INTEGER NOT NULL DEFAULT 0,  -- range of the run instruction's immediate operand; 0 when unknown
  rpt_count_max INTEGER NOT NULL DEFAULT 0,  -- largest repeat counter; 0 when unknown
  atomic_store_granularity INTEGER NOT NULL DEFAULT 0  -- atomic store granularity [bytes]; 0 when unknown
);

-- Graph counts (libpva Graph); exactly one row.
CREATE TABLE graph (
  num_compute_sets INTEGER NOT NULL,  -- compute sets in the graph
  num_edges INTEGER NOT NULL,  -- edges (vertex field connections)
  num_vars INTEGER NOT NULL,  -- variables
  num_vertices INTEGER NOT NULL  -- vertices
);

-- Internal metrics of the optimisations performed on the graph (Graph.optimisationMetrics).
CREATE TABLE optimisation_metrics (
  name TEXT PRIMARY KEY NOT NULL,  -- metric name; free-form
  value REAL NOT NULL  -- metric value
);

-- Options used when compiling the graph (CompilationReport.compilationParameters).
CREATE TABLE compilation_parameters (
  name TEXT PRIMARY KEY NOT NULL,  -- option name, e.g. debug.instrument
  value TEXT NOT NULL  -- option value as text
);

-- Parameters describing the target (CompilationReport.targetParameters).
CREATE TABLE target_parameters (
  name TEXT PRIMARY KEY NOT NULL,  -- parameter name
  value TEXT NOT NULL  -- parameter value as text
);

-- Replicas of the graph (libpva Replica).
CREATE TABLE replicas (
  id INTEGER PRIMARY KEY NOT NULL  -- replica id
);

-- IPUs of the target (libpva IPU).
CREATE TABLE ipus (
  id INTEGER PRIMARY KEY NOT NULL,  -- global IPU id
  replica INTEGER NOT NULL,  -- replica the IPU belongs to
  architecture TEXT NOT NULL  -- IPU.Architecture of this IPU
);

-- Tiles of the target (libpva Tile); one row per tile of every IPU.
CREATE TABLE tiles (
  id INTEGER PRIMARY KEY NOT NULL,  -- global tile id: ipu * tiles_per_ipu + tile_in_ipu
  ipu INTEGER NOT NULL,  -- IPU the tile is on
  tile_in_ipu INTEGER NOT NULL,  -- tile number within its IPU
  relative_sync_delay INTEGER NOT NULL DEFAULT 0,  -- sync delay relative to target.min_sync_delay [cycles]
  clock_frequency REAL NOT NULL  -- tile clock [Hz]
);

-- Vertex types used in the graph (libpva VertexType).
CREATE TABLE vertex_types (
  id INTEGER PRIMARY KEY NOT NULL,  -- vertex type id
  name TEXT NOT NULL,  -- full C++ name, e.g. popops::ScaledAddSupervisor<float,float,true>
  size INTEGER NOT NULL DEFAULT 0,  -- size of the vertex state [bytes]
  source TEXT NOT NULL DEFAULT 'Unknown'  -- VertexType.Source: Asm, CPlusPlus or Unknown
);

-- Compute sets (libpva ComputeSet). The estimated cycle columns summarise the per-tile vector.
CREATE TABLE compute_sets (
  compute_set INTEGER PRIMARY KEY NOT NULL,  -- compute set id; index into CompilationReport.computeSets
  name TEXT NOT NULL,  -- compute set name; not necessarily unique
  num_vertices INTEGER NOT NULL DEFAULT 0,  -- vertices in the compute set
  estimated_cycles_row INTEGER,  -- row of compute_set_estimated_cycles_by_tile; NULL without estimates
  active_cycles_row INTEGER,  -- row of compute_set_active_cycles_by_tile; NULL without estimates
  estimated_cycles_max INTEGER,  -- largest estimated cycles over tiles [cycles]
  estimated_cycles_total INTEGER,  -- estimated cycles summed over tiles [cycles]
  measured_cycles INTEGER  -- measured cycles of its last execution over all tiles (legacy computeSetCycles); NULL if not measured [cycles]
);

-- Vertex instances of one type in one compute set (libpva VertexInstances).
CREATE TABLE compute_set_vertices (
  id INTEGER PRIMARY KEY NOT NULL,  -- row id
  compute_set INTEGER NOT NULL,  -- compute set
  vertex_type INTEGER NOT NULL,  -- vertex type
  count INTEGER NOT NULL,  -- number of instances
  estimated_cycles INTEGER NOT NULL DEFAULT 0,  -- estimated cycles of these instances; 0 if unavailable [cycles]
  count_by_tile_row INTEGER  -- row of vertex_count_by_tile; NULL if not recorded
);

-- Lowered variables used by a compute set (ComputeSet.vars).
CREATE TABLE compute_set_vars (
  compute_set INTEGER NOT NULL,  -- compute set
  var INTEGER NOT NULL,  -- lowered variable (vars_info.id)
  PRIMARY KEY (compute_set, var)
) WITHOUT ROWID;

-- Programs of every Program.Type (libpva Program and its subclasses).
CREATE TABLE programs (
  id INTEGER PRIMARY KEY NOT NULL,  -- program id (Program._id)
  type TEXT NOT NULL,  -- Program.Type name, e.g. Sequence, OnTileExecute, DoExchange
  name TEXT NOT NULL DEFAULT '',  -- program name; may be empty
  compute_set INTEGER,  -- OnTileExecute: the compute set executed
  repeat_count INTEGER,  -- Repeat: hard-coded repeat count; NULL when not hard-coded
  sync_type TEXT,  -- Sync, GlobalExchange: SyncType (Internal, GS1..GS4, Unknown)
  stream_copy_type TEXT,  -- StreamCopyMid: Host, RemoteBuffer, Mixed or Unknown
  call_target INTEGER,  -- Call: the program called
  num_tiles INTEGER,  -- Sans, SyncAns: tiles involved
  exchange INTEGER  -- DoExchange, GlobalExchange, StreamCopy*: exchange id of the legacy profile, if any
);

-- Ordered children of each program (Program.children).
CREATE TABLE program_children (
  parent INTEGER NOT NULL,  -- parent program
  position INTEGER NOT NULL,  -- 0-based position among the parent's children
  child INTEGER NOT NULL,  -- child program
  PRIMARY KEY (parent, position)
) WITHOUT ROWID;

-- Control programs, in order (CompilationReport.controlPrograms).
CREATE TABLE control_programs (
  position INTEGER PRIMARY KEY NOT NULL,  -- 0-based position
  program INTEGER NOT NULL  -- program id
);

-- Functions, in order (CompilationReport.functions); Call.call_target points at one of them.
CREATE TABLE function_programs (
  position INTEGER PRIMARY KEY NOT NULL,  -- 0-based position
  program INTEGER NOT NULL  -- program id
);

-- Per-tile vectors of a program: kind is control_code, bytes_received, bytes_sent,
-- estimated_cycles, exchange_cycles, sync_cycles or code_bytes, stored in matrix
-- program_<kind>_by_tile; total, min and max summarise the vector.
CREATE TABLE program_vectors (
  program INTEGER NOT NULL,  -- program id
  kind TEXT NOT NULL,  -- which vector
  row INTEGER NOT NULL,  -- row in matrix program_<kind>_by_tile
  total INTEGER NOT NULL,  -- sum over tiles
  min INTEGER NOT NULL,  -- smallest value over tiles
  max INTEGER NOT NULL,  -- largest value over tiles
  PRIMARY KEY (program, kind)
) WITHOUT ROWID;

-- Exchanges of a legacy (v1) profile: exchanges (internal), externalExchanges and hostExchanges,
-- numbered as programs.exchange numbers them. Each per-tile vector is a row of matrix
-- program_<kind>_by_tile; the programs that perform an exchange point at the same rows.
CREATE TABLE exchanges (
  family TEXT NOT NULL,  -- internal, external or host
  exchange INTEGER NOT NULL,  -- exchange id within its family
  kind TEXT NOT NULL,  -- bytes_received, bytes_sent, estimated_cycles, exchange_cycles or code_bytes
  row INTEGER NOT NULL,  -- row in matrix program_<kind>_by_tile
  PRIMARY KEY (family, exchange, kind)
) WITHOUT ROWID;

-- Lowered variables used by a program (Program.vars).
CREATE TABLE program_vars (
  program INTEGER NOT NULL,  -- program id
  var INTEGER NOT NULL,  -- lowered variable (vars_info.id)
  PRIMARY KEY (program, var)
) WITHOUT ROWID;

-- Debug contexts (ids into debug.cbor) of programs, compute sets and variables.
CREATE TABLE debug_context_refs (
  kind TEXT NOT NULL,  -- program, compute_set or variable
  object INTEGER NOT NULL,  -- id of the program, compute set or (unlowered) variable
  debug_context INTEGER NOT NULL,  -- debug context id
  PRIMARY KEY (kind, object, debug_context)
) WITHOUT ROWID;

-- Memory storage categories (libpva VariableCategory).
CREATE TABLE var_categories (
  id INTEGER PRIMARY KEY NOT NULL,  -- category id
  name TEXT NOT NULL UNIQUE,  -- name as in Memory.category, e.g. vertexCode, internalExchangeCode
  description TEXT NOT NULL DEFAULT ''  -- what the category holds
);

-- Unlowered variables (libpva Variable).
CREATE TABLE variables (
  id INTEGER PRIMARY KEY NOT NULL,  -- variable id (Variable._id)
  name TEXT NOT NULL  -- variable name
);

-- Lowered variables: one row per piece of a variable on one tile (libpva LoweredVariable).
CREATE TABLE vars_info (
  id INTEGER PRIMARY KEY NOT NULL,  -- lowered variable id (LoweredVariable._id)
  tile INTEGER NOT NULL,  -- tile (within one replica) the piece is on
  name TEXT NOT NULL,  -- lowered variable name
  size_bytes INTEGER NOT NULL,  -- size [bytes]
  alignment INTEGER NOT NULL DEFAULT 4,  -- alignment [bytes]
  offset INTEGER NOT NULL DEFAULT 0,  -- offset in the tile's variable storage [bytes]
  category INTEGER NOT NULL,  -- var_categories.id
  allocated INTEGER NOT NULL DEFAULT 1,  -- 1 if allocated to a tile
  constant INTEGER NOT NULL DEFAULT 0,  -- 1 if the data is never written
  always_live INTEGER NOT NULL DEFAULT 0,  -- 1 if it can never overlap with others
  executable INTEGER NOT NULL DEFAULT 0,  -- 1 if it needs executable memory
  vertex_code INTEGER NOT NULL DEFAULT 0,  -- 1 if it holds vertex code
  lowest_256k INTEGER NOT NULL DEFAULT 0,  -- 1 if it must be in the first 256 KB
  start_section INTEGER NOT NULL DEFAULT 0,  -- 1 if it holds an entry point
  in_interleaved_mem INTEGER NOT NULL DEFAULT 0,  -- 1 if it must be in interleaved memory
  accessed_in_vertex INTEGER NOT NULL DEFAULT 0,  -- 1 if it may be accessed in a vertex
  equivalence_class INTEGER NOT NULL DEFAULT 0,  -- variables of one class share a liveness profile
  unlowered_var INTEGER,  -- variables.id it comes from; NULL if none
  alloc_order INTEGER NOT NULL DEFAULT 0  -- position in the tile's allocation order
);

-- Lowered variables that may not share a memory element or region with another.
CREATE TABLE lowered_var_constraints (
  var INTEGER NOT NULL,  -- lowered variable
  kind TEXT NOT NULL,  -- element or region
  other INTEGER NOT NULL,  -- the lowered variable it must be kept apart from
  PRIMARY KEY (var, kind, other)
) WITHOUT ROWID;

-- Liveness intervals of equivalence classes: live from liveness step start to end-1. The
-- not-always-live variables of a step are the lowered variables of the classes live in it.
CREATE TABLE equivalence_class_steps (
  class INTEGER NOT NULL,  -- equivalence class id
  start INTEGER NOT NULL,  -- first liveness step the class is live in
  "end" INTEGER NOT NULL,  -- one past the last liveness step the class is live in
  PRIMARY KEY (class, start)
) WITHOUT ROWID;

-- Memory use of each tile of one replica (libpva Memory). total excludes gaps.
CREATE TABLE memory_by_tile (
  tile INTEGER PRIMARY KEY NOT NULL,  -- tile id (within one replica)
  total INTEGER NOT NULL,  -- memory used excluding gaps [bytes]
  total_including_gaps INTEGER NOT NULL,  -- memory required including gaps [bytes]
  interleaved INTEGER NOT NULL,  -- interleaved region excluding gaps [bytes]
  interleaved_including_gaps INTEGER NOT NULL,  -- interleaved region including gaps [bytes]
  non_interleaved INTEGER NOT NULL,  -- non-interleaved region excluding gaps [bytes]
  non_interleaved_including_gaps INTEGER NOT NULL,  -- non-interleaved region including gaps [bytes]
  overflowed INTEGER NOT NULL,  -- memory beyond the tile's capacity excluding gaps [bytes]
  overflowed_including_gaps INTEGER NOT NULL,  -- memory beyond the tile's capacity including gaps [bytes]
  always_live_bytes INTEGER NOT NULL,  -- always-live memory [bytes]
  not_always_live_bytes INTEGER NOT NULL  -- peak not-always-live memory over the program [bytes]
);

-- Memory by category and region over all tiles of one replica; per-tile values are in matrix
-- memory_category_by_tile.
CREATE TABLE memory_by_category (
  category INTEGER NOT NULL,  -- var_categories.id
  region TEXT NOT NULL,  -- interleaved, nonInterleaved or overflowed
  overlapped INTEGER NOT NULL,  -- 1 for overlapped memory, 0 for non-overlapped
  total INTEGER NOT NULL,  -- bytes summed over tiles [bytes]
  max INTEGER NOT NULL,  -- largest value on one tile [bytes]
  PRIMARY KEY (category, region, overlapped)
) WITHOUT ROWID;

-- Vertex memory per vertex type per tile (libpva VertexMemory).
CREATE TABLE vertex_memory (
  tile INTEGER NOT NULL,  -- tile id (within one replica)
  vertex_type INTEGER NOT NULL,  -- vertex type
  code_bytes INTEGER NOT NULL DEFAULT 0,  -- code [bytes]
  copy_ptr_bytes INTEGER NOT NULL DEFAULT 0,  -- copy pointers [bytes]
  descriptor_bytes INTEGER NOT NULL DEFAULT 0,  -- descriptors [bytes]
  edge_ptr_bytes INTEGER NOT NULL DEFAULT 0,  -- edge pointers [bytes]
  padding_bytes INTEGER NOT NULL DEFAULT 0,  -- padding [bytes]
  vertex_data_bytes INTEGER NOT NULL DEFAULT 0,  -- vertex data [bytes]
  PRIMARY KEY (tile, vertex_type)
) WITHOUT ROWID;

-- Vertex memory per compute set per tile (legacy memory.byComputeSet); all-zero rows are left out.
CREATE TABLE compute_set_memory (
  compute_set INTEGER NOT NULL,  -- compute set
  tile INTEGER NOT NULL,  -- tile id (within one replica)
  code_bytes INTEGER NOT NULL DEFAULT 0,  -- code; may be shared with other compute sets [bytes]
  copy_ptr_bytes INTEGER NOT NULL DEFAULT 0,  -- copy pointers [bytes]
  descriptor_bytes INTEGER NOT NULL DEFAULT 0,  -- descriptors [bytes]
  edge_ptr_bytes INTEGER NOT NULL DEFAULT 0,  -- edge pointers [bytes]
  padding_bytes INTEGER NOT NULL DEFAULT 0,  -- padding [bytes]
  vertex_data_bytes INTEGER NOT NULL DEFAULT 0,  -- vertex data [bytes]
  PRIMARY KEY (compute_set, tile)
) WITHOUT ROWID;

-- Program steps with liveness information, depth first (libpva LivenessProgramStep).
CREATE TABLE liveness_steps (
  id INTEGER PRIMARY KEY NOT NULL,  -- liveness step index
  program INTEGER NOT NULL,  -- program of this step
  parent INTEGER,  -- enclosing liveness step; NULL at the top
  depth INTEGER NOT NULL DEFAULT 0,  -- nesting depth in the program tree
  not_always_live_bytes INTEGER NOT NULL  -- not-always-live memory summed over tiles [bytes]
);

-- Not-always-live memory of each liveness step on each IPU.
CREATE TABLE liveness_step_ipus (
  step INTEGER NOT NULL,  -- liveness step
  ipu INTEGER NOT NULL,  -- IPU (within one replica)
  bytes INTEGER NOT NULL,  -- not-always-live memory on the IPU [bytes]
  PRIMARY KEY (step, ipu)
) WITHOUT ROWID;

-- Tiles whose per-tile liveness is recorded (CompilationReport.tilesWithLivenessInfo).
CREATE TABLE liveness_tiles (
  tile INTEGER PRIMARY KEY NOT NULL  -- tile id (within one replica)
);

-- Always-live variables per tile (CompilationReport.alwaysLiveVariables*).
CREATE TABLE always_live_vars (
  var INTEGER NOT NULL,  -- variables.id
  tile INTEGER NOT NULL,  -- tile id (within one replica)
  bytes INTEGER NOT NULL,  -- size on this tile [bytes]
  PRIMARY KEY (var, tile)
) WITHOUT ROWID;

-- Engine runs (libpva Run).
CREATE TABLE runs (
  id INTEGER PRIMARY KEY NOT NULL,  -- run index
  name TEXT NOT NULL DEFAULT '',  -- name given to the run
  microseconds_start INTEGER NOT NULL DEFAULT 0,  -- host time at the start [microseconds]
  microseconds_end INTEGER NOT NULL DEFAULT 0,  -- host time at the end [microseconds]
  first_step INTEGER NOT NULL,  -- id of the run's first step
  num_steps INTEGER NOT NULL  -- steps in the run
);

-- Cycle counter of each IPU at the start and end of each run (Run.cyclesByIpu).
CREATE TABLE run_cycles_by_ipu (
  run INTEGER NOT NULL,  -- run index
  ipu INTEGER NOT NULL,  -- IPU id
  start INTEGER NOT NULL,  -- cycle counter at the start [cycles]
  "end" INTEGER NOT NULL,  -- cycle counter at the end [cycles]
  PRIMARY KEY (run, ipu)
) WITHOUT ROWID;

-- Options set for a run (Run.executionParameters).
CREATE TABLE run_parameters (
  run INTEGER NOT NULL,  -- run index
  name TEXT NOT NULL,  -- option name
  value TEXT NOT NULL,  -- option value as text
  PRIMARY KEY (run, name)
) WITHOUT ROWID;

-- Execution steps of all runs in order (libpva ExecutionStep). Implicit syncs have no program.
CREATE TABLE steps (
  id INTEGER PRIMARY KEY NOT NULL,  -- step index over the whole execution
  run INTEGER NOT NULL,  -- run index
  type TEXT NOT NULL,  -- Program.Type name of the step's program, e.g. OnTileExecute, Sync
  program INTEGER,  -- program id; NULL for an implicit sync
  compute_set INTEGER,  -- OnTileExecute: compute set executed
  name TEXT NOT NULL DEFAULT '',  -- program name, or the implicit sync's name
  sync_type TEXT,  -- Sync steps: SyncType (Internal, GS1..GS4, External, Unknown)
  cycles_overlapped INTEGER NOT NULL DEFAULT 0  -- cycles overlapped with the previous step [cycles]
);

-- Per-IPU figures of each step (libpva Ipu). Absolute cycle = cycles_base + *_cycles_*.
CREATE TABLE steps_by_ipu (
  step_id INTEGER NOT NULL,  -- step index
  ipu INTEGER NOT NULL,  -- IPU id
  profiled INTEGER NOT NULL DEFAULT 1,  -- 1 if this IPU was profiled; all figures are 0 otherwise
  cycles INTEGER NOT NULL,  -- cycles summed over the IPU's tiles [cycles]
  active_tiles INTEGER NOT NULL,  -- tiles computing or exchanging
  cycles_base INTEGER NOT NULL,  -- cycle counter of this IPU at the start of the run [cycles]
  all_cycles_from_min INTEGER NOT NULL,  -- earliest start over all tiles, relative to cycles_base [cycles]
  all_cycles_from_max INTEGER NOT NULL,  -- latest start over all tiles [cycles]
  all_cycles_from_avg INTEGER NOT NULL,  -- mean start over all tiles [cycles]
  all_cycles_to_min INTEGER NOT NULL,  -- earliest end over all tiles [cycles]
  all_cycles_to_max INTEGER NOT NULL,  -- latest end over all tiles [cycles]
  all_cycles_to_avg INTEGER NOT NULL,  -- mean end over all tiles [cycles]
  active_cycles_from_min INTEGER NOT NULL,  -- earliest start over active tiles [cycles]
  active_cycles_from_max INTEGER NOT NULL,  -- latest start over active tiles [cycles]
  active_cycles_from_avg INTEGER NOT NULL,  -- mean start over active tiles [cycles]
  active_cycles_to_min INTEGER NOT NULL,  -- earliest end over active tiles [cycles]
  active_cycles_to_max INTEGER NOT NULL,  -- latest end over active tiles [cycles]
  active_cycles_to_avg INTEGER NOT NULL,  -- mean end over active tiles [cycles]
  tile_cycles_max INTEGER NOT NULL DEFAULT 0,  -- largest per-tile cycles on this IPU [cycles]
  thread_balance REAL NOT NULL DEFAULT 0,  -- hardware thread utilisation, 0..1
  tile_balance REAL NOT NULL DEFAULT 0,  -- tile utilisation, 0..1
  active_tile_balance REAL NOT NULL DEFAULT 0,  -- utilisation of active tiles, 0..1
  data_in INTEGER NOT NULL DEFAULT 0,  -- data received by the IPU [bytes]
  data_out INTEGER NOT NULL DEFAULT 0,  -- data sent by the IPU [bytes]
  data_balance REAL NOT NULL DEFAULT 0,  -- balance of data per tile, 0..1
  PRIMARY KEY (step_id, ipu)
) WITHOUT ROWID;

-- Compute sets executed in each step (ExecutionStep.computeSets).
CREATE TABLE step_compute_sets (
  step_id INTEGER NOT NULL,  -- step index
  position INTEGER NOT NULL,  -- 0-based position within the step
  compute_set INTEGER NOT NULL,  -- compute set id
  cycles_row INTEGER,  -- row of step_compute_set_cycles_by_tile; NULL: the step's own cycles
  PRIMARY KEY (step_id, position)
) WITHOUT ROWID;

-- Measured or simulated cycles per vertex type in each step's compute sets.
CREATE TABLE step_vertex_cycles (
  step_id INTEGER NOT NULL,  -- step index
  compute_set INTEGER NOT NULL,  -- compute set id
  vertex_type INTEGER NOT NULL,  -- vertex type id
  count INTEGER NOT NULL,  -- instances executed
  cycles INTEGER NOT NULL,  -- cycles summed over the instances [cycles]
  PRIMARY KEY (step_id, compute_set, vertex_type)
) WITHOUT ROWID;

-- Measured cycles of each vertex in its last execution (legacy profilerMode VERTICES).
CREATE TABLE vertex_cycles (
  vertex INTEGER PRIMARY KEY NOT NULL,  -- vertex id
  compute_set INTEGER NOT NULL,  -- compute set of the vertex
  vertex_type INTEGER NOT NULL,  -- vertex type of the vertex
  cycles INTEGER NOT NULL  -- cycles of its last execution [cycles]
);

-- Cycles by activity summed over tiles, per run and IPU (libpva TileCycleTotals).
CREATE TABLE cycle_totals (
  run INTEGER NOT NULL,  -- run index
  ipu INTEGER NOT NULL,  -- IPU id
  active_compute INTEGER NOT NULL,  -- compute cycles with the active thread computing [cycles]
  compute INTEGER NOT NULL,  -- cycles when at least one thread executes [cycles]
  inter_ipu_exchange INTEGER NOT NULL,  -- inter-IPU exchange [cycles]
  stream_copy_begin INTEGER NOT NULL,  -- beginning part of stream copies [cycles]
  stream_copy INTEGER NOT NULL,  -- main part of stream copies [cycles]
  stream_copy_end INTEGER NOT NULL,  -- end part of stream copies [cycles]
  internal_exchange INTEGER NOT NULL,  -- internal exchange [cycles]
  sync INTEGER NOT NULL,  -- sync [cycles]
  total INTEGER NOT NULL,  -- all activities [cycles]
  PRIMARY KEY (run, ipu)
) WITHOUT ROWID;

-- Lightweight-profiling block measurements per tile (ExecutionReport.blocks).
CREATE TABLE blocks (
  id INTEGER PRIMARY KEY NOT NULL,  -- block id
  tile INTEGER NOT NULL,  -- tile id
  program INTEGER,  -- program measured; NULL if unknown
  cycles_from INTEGER NOT NULL,  -- first cycle [cycles]
  cycles_to INTEGER NOT NULL,  -- last cycle [cycles]
  is_stream_copy INTEGER NOT NULL DEFAULT 0,  -- 1 for a stream copy block
  is_common INTEGER NOT NULL DEFAULT 0,  -- 1 for a block common to several programs
  is_overflow INTEGER NOT NULL DEFAULT 0  -- 1 if the block buffer overflowed
);

-- Performance estimates of a compiler that reports per kernel, such as a Cerebras compile report
-- (compile_report.txt): the overall estimate (kernel NULL), then one row per kernel in file order.
CREATE TABLE compile_estimates (
  id INTEGER PRIMARY KEY NOT NULL,  -- row number: 0 is the overall estimate
  kernel TEXT,  -- kernel name, e.g. fc_para30.fc.lib_fc; NULL for the overall estimate
  compute_set INTEGER,  -- compute_sets row that stands for the kernel; NULL for the overall estimate
  samples_per_second REAL,  -- estimated throughput, the lower of the two below [samples/s]
  compute_samples_per_second REAL,  -- throughput allowed by computation [samples/s]
  transmission_samples_per_second REAL,  -- throughput allowed by transmission between kernels [samples/s]
  active_pes INTEGER,  -- processing elements the kernel uses; NULL for the overall estimate [PEs]
  active_pes_percent INTEGER,  -- share of all processing elements used, rounded to a whole number; NULL for kernels [%]
  compute_utilization_percent INTEGER  -- share of time the active processing elements compute, rounded [%]
);

-- Values a producer had but this format has no column for, kept as JSON (queryable).
CREATE TABLE extras (
  source TEXT NOT NULL,  -- where the value came from, e.g. legacy-graph-profile
  path TEXT NOT NULL,  -- JSON location of the value in its source
  value TEXT NOT NULL,  -- the value, as JSON
  PRIMARY KEY (source, path)
) WITHOUT ROWID;

-- Per-tile matrices stored as Arrow data: one row per matrix (see profile_matrices.json).
CREATE TABLE matrices (
  name TEXT PRIMARY KEY NOT NULL,  -- matrix name
  num_rows INTEGER NOT NULL,  -- rows written
  num_cols INTEGER NOT NULL,  -- columns: tiles, or as profile_matrices.json says
  rows_per_chunk INTEGER NOT NULL  -- rows in every chunk but the last
);

-- Chunks of the per-tile matrices: an Arrow IPC stream of one record batch each, compressed as a
-- whole with `codec`. Read one with pyarrow.ipc.open_stream(pyarrow.Codec(codec).decompress(data,
-- raw_size)) (or the data itself when codec is none).
CREATE TABLE matrix_chunks (
  matrix TEXT NOT NULL,  -- matrix name
  first_row INTEGER NOT NULL,  -- first row held by the chunk
  num_rows INTEGER NOT NULL,  -- rows held by the chunk
  codec TEXT NOT NULL,  -- compression of data: zstd, lz4 or none
  raw_size INTEGER NOT NULL,  -- size of the Arrow IPC stream before compression [bytes]
  data BLOB NOT NULL  -- the compressed Arrow IPC stream: column "values", fixed_size_list<uintN> of num_cols
);

-- Indexes the reader relies on.
CREATE UNIQUE INDEX matrix_chunks_by_row ON matrix_chunks (matrix, first_row);
CREATE INDEX compute_set_vertices_by_cs ON compute_set_vertices (compute_set);
CREATE INDEX vars_info_by_tile ON vars_info (tile, alloc_order, id, size_bytes);
CREATE INDEX vars_info_by_var ON vars_info (unlowered_var);
CREATE INDEX vars_info_by_class ON vars_info (equivalence_class);
CREATE INDEX equivalence_class_steps_by_start ON equivalence_class_steps (start);
CREATE INDEX steps_by_run ON steps (run);
CREATE INDEX steps_by_program ON steps (program);
CREATE INDEX liveness_steps_by_program ON liveness_steps (program);
CREATE INDEX always_live_vars_by_tile ON always_live_vars (tile);
CREATE INDEX blocks_by_tile ON blocks (tile, cycles_from);
CREATE INDEX vertex_memory_by_tile ON vertex_memory (tile);
CREATE INDEX compute_set_memory_by_tile ON compute_set_memory (tile);
