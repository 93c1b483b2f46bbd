/*
 * dpg_limits.h: every limit a client can push against, in one place.
 *
 * Each constant bounds something a request, a policy file or a job can ask
 * for.  Code that enforces a limit names the constant here; nothing else
 * hard-codes a bound.  The values are chosen so that the worst admissible
 * request still answers in well under a second on a 2-core machine.
 */
#ifndef DPG_LIMITS_H
#define DPG_LIMITS_H

/* HTTP */
#define DPG_MAX_BODY_BYTES          (1u << 20)   /* JSON request bodies */
#define DPG_MAX_CSV_BYTES           (64u << 20)  /* PUT .../data text/csv */
#define DPG_MAX_JSON_DEPTH          32           /* nesting of any JSON body */
#define DPG_MAX_URL_BYTES           2048         /* request target: path and query */
/* Parameters in one query: no route reads more than a few, and each costs
 * libmicrohttpd a record in the connection's pool (DPG_CONNECTION_MEMORY_BYTES),
 * which a few hundred used up (server/http/http_serve.c, on_uri). */
#define DPG_MAX_QUERY_PARAMS        16
#define DPG_CONNECTION_TIMEOUT_S    30           /* idle connection */
#define DPG_MAX_CONNECTIONS         1024
/* A request's header block, from its first byte (serve --header-timeout;
 * server/http/http_conns.h): a client that drips headers cannot hold a slot. */
#define DPG_HEADER_TIMEOUT_S        5
#define DPG_MAX_HEADER_TIMEOUT_S    3600
/* Seconds a request's body may take to arrive, from its headers (serve
 * --body-timeout; http_serve.c, on_request): its default and its largest. */
#define DPG_BODY_TIMEOUT_S          300
#define DPG_MAX_BODY_TIMEOUT_S      86400
/* serve's listen address, data directory and HTTP worker threads by
 * default, and the most threads --threads takes. */
#define DPG_SERVE_LISTEN            "127.0.0.1:8080"
#define DPG_SERVE_DATA_DIR          "dpgate-data"
#define DPG_SERVE_THREADS           8
#define DPG_MAX_SERVE_THREADS       64
/* Store connections serve opens beyond one per HTTP thread: the job pool's
 * and serve's own, so that neither waits behind the requests. */
#define DPG_SERVE_EXTRA_DB_CONNECTIONS 2
/* Connections from one client address at once (serve --max-conns-per-ip):
 * above the 64 clients of bench_server and test suites' few dozen; a
 * server behind a proxy, whose clients all come from its address, raises
 * it to DPG_MAX_CONNECTIONS. */
#define DPG_MAX_CONNECTIONS_PER_IP  128
/* Slots that connections waiting for a request may not take: past
 * DPG_MAX_CONNECTIONS - this, a new connection closes the longest-waiting
 * one, so that new clients and requests in service always find a slot. */
#define DPG_CONNECTION_RESERVE      64
/* libmicrohttpd memory per connection (request line, headers, read and
 * write buffers; bodies are copied out).  It zeroes this pool for every
 * request, so it is kept small: 16 KiB holds any request line and headers
 * within DPG_MAX_URL_BYTES and the few headers dpgate reads. */
#define DPG_CONNECTION_MEMORY_BYTES (16u << 10)
#define DPG_IDEMPOTENCY_KEY_BYTES   128
#define DPG_MAX_NOTE_BYTES          1024
#define DPG_MAX_ID_BYTES            64           /* dataset ids, names */
#define DPG_MAX_NAME_BYTES          256
#define DPG_MAX_PAGE_SIZE           1000         /* listing pages (ledger, audit, reservations, PATE, jobs) */
#define DPG_DEFAULT_PAGE_SIZE       100
#define DPG_MAX_SCOPED_DATASETS     256          /* datasets on one analyst key */
/* `dpgate check` policy files (at most DPG_MAX_BODY_BYTES, as JSON bodies) */
#define DPG_MAX_CHECK_DATASETS      10000        /* datasets one policy names */
#define DPG_MAX_CHECK_PLANNED       100000       /* planned events of one dataset */

/* Privacy events */
#define DPG_MAX_EVENT_DEPTH         8            /* nesting of events */
#define DPG_MAX_EVENT_NODES         4096         /* nodes in one event tree */
#define DPG_MAX_COMPOSITION_COUNT   100000000LL  /* self_composed count (1e8) */
#define DPG_MAX_ORDERS              256          /* RDP orders in a request */
#define DPG_MAX_RDP_ORDER           1e6
#define DPG_MAX_BUDGET_EPSILON      1e6          /* a dataset's budget epsilon */
#define DPG_MAX_FILTER_ORDERS       32           /* orders of a dataset's rdp filter */
/* A dataset's filter orders are above this: RDP converts to epsilon only
 * above it (acct__rdp_order_epsilon). */
#define DPG_MIN_FILTER_ORDER        1.01
#define DPG_MAX_NUM_BUCKETS         1000000000LL /* randomized response */
#define DPG_MAX_DATASET_SIZE        1000000000000LL
/* Integer sensitivity of discrete_laplace / discrete_gaussian events: 2^53,
 * every integer a double holds exactly.  The real-valued Laplace and
 * Gaussian releases state their sensitivity in units of a fine grid
 * (mechanisms/mech_noise.c), which is far above 2^31. */
#define DPG_MAX_EVENT_SENSITIVITY   9007199254740992LL

/* Mechanisms and PATE */
#define DPG_MAX_VECTOR_LEN          100000       /* values / scores in one call */
#define DPG_MAX_VOTE_CLASSES        100000
#define DPG_MAX_TEACHERS            1000000
#define DPG_MAX_PATE_BATCH          10000
#define DPG_MAX_PATE_BATCH_CELLS    (1u << 22)   /* queries x classes of one batch (32 MiB of votes) */
#define DPG_MAX_PATE_ORDERS         64           /* RDP orders a PATE session tracks */
#define DPG_MAX_PATE_RELEASE_WORK   500000000LL  /* answered queries x teachers in one release */
#define DPG_MAX_PATE_RELEASE_WALK   (1LL << 24)  /* answers x distances a release walks (under 1 s);
						  * a public tail bounds the rest (docs/pate.md) */
#define DPG_MAX_PLD_WORK            4e8          /* grid operations of one PLD pricing */
/* Work units of one RDP pricing: a unit is one term of a
 * subsampled Gaussian's O(order) sum, 40 to 50 ns (docs/accountants.md). */
#define DPG_MAX_RDP_WORK            5e6
/* ... of one calibration's whole search (some 30 to 100 pricings): 2 s at
 * most, as a pld pricing or calibration may take (DPG_MAX_PLD_WORK). */
#define DPG_MAX_RDP_CALIBRATION_WORK 4e7
#define DPG_MIN_LEDGER_DELTA        1e-100       /* budget delta of an rdp or zcdp ledger */
#define DPG_MAX_LABEL_EM_N          100000000LL

/* ---- mechanisms/ ---- */
/* Exact samplers: ranges in which the integer arithmetic is proven to fit. */
#define DPG_MECH_DLAP_MIN_SCALE     0x1p-20      /* discrete Laplace scale (integer units) */
#define DPG_MECH_DLAP_MAX_SCALE     0x1p50
#define DPG_MECH_DGAUSS_MIN_SIGMA   0x1p-8       /* discrete Gaussian sigma (integer units) */
#define DPG_MECH_DGAUSS_MAX_SIGMA   0x1p20
/* Hosted tables (besides DPG_MAX_CSV_* below) */
#define DPG_MAX_CSV_CATEGORIES      65536        /* distinct values of one categorical column */
#define DPG_MAX_HISTOGRAM_BINS      10000        /* public categories of one histogram query */
/* ---- end mechanisms ---- */

/* Jobs and training */
#define DPG_MAX_JOB_WORKERS         2
#define DPG_MAX_QUEUED_JOBS         64
/* On a shared database: how long a running job's lease lasts unless its
 * server renews it, how often the server renews its jobs' leases and
 * sweeps for expired ones, and how often an idle worker looks for jobs
 * queued through other servers (docs/operations.md, "Jobs on a shared
 * database"). */
#define DPG_JOB_LEASE_S             15
#define DPG_JOB_LEASE_RENEW_S       3
#define DPG_JOB_POLL_S              2
#define DPG_MAX_TRAINING_STEPS      10000000LL
#define DPG_MAX_HIDDEN_UNITS        4096

/* Hosted tables */
#define DPG_MAX_CSV_ROWS            10000000LL
#define DPG_MAX_CSV_COLUMNS         1024
#define DPG_MAX_CSV_FIELD_BYTES     1024
/* Parsed hosted tables the server keeps between queries while no request
 * uses them (server/store/store.h); least recently used dropped first. */
#define DPG_TABLE_CACHE_BYTES       ((size_t)256 << 20)
/* Hosted tables read and parsed at once, across all tables, by requests,
 * jobs and uploads together (srv_table_cache_get, _slot_take); others
 * wait for a slot.  Each parse holds the file's bytes and its typed
 * columns (about 115 MB for a 64 MiB file of numbers), so memory for
 * parses is about this many times the largest, whatever --threads is.
 * 2: parsing is CPU bound and the reference machine has 2 cores, so more
 * at once would only hold more memory, not end sooner; 1 would keep a
 * small table's first query behind a large one's parse while a core is
 * free. */
#define DPG_TABLE_PARSES            2

/* ==== trainers ==== */
#define DPG_MAX_TRAIN_EXAMPLES      10000000LL   /* rows a trainer reads (= CSV rows) */
#define DPG_MAX_FEATURES            4096         /* features per row (784 for MNIST) */
#define DPG_MAX_CLASSES             1000         /* label values 0..classes-1 */
/* Rows of one predict request (POST /v1/jobs/{id}/predict, JSON or CSV,
 * within DPG_MAX_BODY_BYTES) and of one `dpgate predict` input: bounds
 * the answer, rows x classes scores, to 10^4 x 10^3 numbers. */
#define DPG_MAX_PREDICT_ROWS        10000
/* Multiply-adds of one predict request, rows x the model's per-row cost
 * (its weights, a convolution's kernels at every pixel): the rows are
 * scored on an HTTP thread.  Measured on the 2-core test machine under
 * load (load average 8), the slowest case, a 16.4M-weight MLP streamed
 * from memory for every row, takes about 2 ns a multiply-add: its 8 rows
 * a request score in about 0.3 s (answered in 0.85 s, 0.5 s of it reading
 * the 131 MB model, as for one row); 128 rows of a 1M-weight model are
 * answered in 0.08 to 0.15 s.  Before, 10^4 rows of the large model held
 * a thread for 110 s. */
#define DPG_MAX_PREDICT_WORK        (1LL << 27)
/* Numbers in one JSON answer that is built whole in memory, where jansson
 * holds each as an object of about 60 bytes: a predict answer's rows x
 * classes scores, and a model's parameters with ?format=json.  A larger
 * one is refused (422): fewer rows a request, or the binary model. */
#define DPG_MAX_JSON_NUMBERS        (1L << 20)
#define DPG_MAX_EPOCHS              10000
#define DPG_MAX_LOT_SIZE            1000000      /* expected DP-SGD lot size L */
/* The smallest clip_norm C of a private DP-SGD job: above it no rounding
 * of a clipped contribution underflows past the clipping margin's slack
 * (docs/training.md, "Clipping in floating point"). */
#define DPG_MIN_CLIP_NORM           0x1p-400
#define DPG_MAX_HIDDEN_LAYERS       2            /* MLP hidden layers */
#define DPG_MAX_MODEL_PARAMS        (1LL << 24)  /* weights + biases (128 MiB) */
/* A serialized model read back from the database: its parameters as
 * doubles plus a header far under 1 MiB (trn_model_serialize). */
#define DPG_MAX_MODEL_BYTES         (DPG_MAX_MODEL_PARAMS * 8 + (1LL << 20))
#define DPG_MAX_PCA_COMPONENTS      1024
#define DPG_MAX_IDX_BYTES           (512LL << 20) /* one decompressed IDX file */
#define DPG_MAX_ENSEMBLE_PARTIES    100000       /* parties M of an ensemble job */
#define DPG_MAX_ENSEMBLE_AUX_ROWS   100000       /* auxiliary rows labelled by the ensemble */
#define DPG_MAX_ENSEMBLE_FEATURES   2048         /* features of its ERM (Hessian 32 MiB) */
#define DPG_MAX_ENSEMBLE_LOCAL_KINDS 16          /* entries of a local_model list */
#define DPG_MAX_ENSEMBLE_KNN_K      100          /* neighbours of a knn local model */
#define DPG_MAX_ENSEMBLE_KNN_WORK   1e11         /* aux rows x train rows x features for knn */
#define DPG_MAX_ENSEMBLE_TREE_DEPTH 16           /* depth of a decision_tree local model */
/* Soft large margin clustering (slmc) */
#define DPG_MAX_SLMC_CLUSTERS       100          /* cluster codes C */
#define DPG_MAX_SLMC_FEATURES       4096         /* random Fourier features D */
#define DPG_MAX_SLMC_ITERATIONS     1000         /* ADMM rounds K */
#define DPG_MAX_SLMC_PARTIES        1000         /* learners M */
#define DPG_MAX_RFF_WEIGHTS         (1LL << 23)  /* D x d entries of the feature map (64 MiB) */
#define DPG_MAX_SLMC_AUX_ROWS       100000       /* public start rows FCM runs on */
/* PATE jobs (trainers/trn_pate.c) */
#define DPG_MAX_PATE_JOB_TEACHERS   10000        /* teachers n of a pate job */
#define DPG_MAX_PATE_QUERIES        100000       /* student rows asked about */
#define DPG_MAX_PATE_STUDENT_ROWS   100000       /* rows of a job's student_data */
#define DPG_MAX_PATE_VOTE_WORK      100000000LL  /* teachers x queries (every vote a forward pass) */
/* A private dpsgd run's work: steps x (rows sampled + (lot_size + 1) x one
 * example's forward multiply-adds), from public sizes only (docs/training.md,
 * "How long a job may run"); about half a day of one core at most. */
#define DPG_MAX_DPSGD_WORK          1e14
/* ==== end trainers ==== */

/* ==== dashboard: long-poll and CORS ==== */
/* A long-poll (?wait=S) waits at most this long before its 304. */
#define DPG_MAX_LONG_POLL_S         60
/* Long-polls suspended at once (serve --max-waiters, default and ceiling);
 * past it 503.  Each holds a connection slot but no thread and no
 * database connection, so the ceiling stays under the slots left after
 * the reserve (DPG_MAX_CONNECTIONS - DPG_CONNECTION_RESERVE). */
#define DPG_LONG_POLL_WAITERS       256
#define DPG_MAX_LONG_POLL_WAITERS   768
/* Every suspended long-poll reads its resource again this often, whether
 * or not a commit woke it: a safety net under the wake-ups. */
#define DPG_LONG_POLL_RECHECK_S     10
/* On PostgreSQL, the connection that LISTENs for other servers' commits:
 * how long one attempt to connect may take, and the wait after a failed
 * or lost one (doubled from the first to the last while it keeps
 * failing), so that a database that is down is not hammered. */
#define DPG_PG_LISTEN_CONNECT_TIMEOUT_S 10
/* On PostgreSQL, how long a statement's answer may go without a byte from
 * the server before its connection is given up and the request answers
 * 503: a primary that accepts statements and answers nothing (hung on its
 * disk, or a peer whose kernel still acknowledges) would otherwise hold
 * the request, every spend batched behind it, /healthz and the shutdown.
 * Above the 30 s lock timeout, the longest a statement waits by design. */
#define DPG_PG_SILENT_S             60
#define DPG_PG_LISTEN_BACKOFF_MIN_MS    100
#define DPG_PG_LISTEN_BACKOFF_MAX_MS    5000
/* serve --cors-origin: origins allowed, and the length of one. */
#define DPG_MAX_CORS_ORIGINS        16
#define DPG_MAX_ORIGIN_BYTES        256
/* ==== end dashboard ==== */

/* ==== convolutional models (model "cnn" of a dpsgd job) ==== */
#define DPG_MAX_CONV_LAYERS         2            /* conv + pooling blocks */
#define DPG_MAX_CONV_CHANNELS       256          /* channels of an image or a block */
#define DPG_MAX_CONV_KERNEL         9            /* side of a (square, odd) kernel */
/* ==== end convolutional models ==== */

/* ==== dpgate migrate ==== */
#define DPG_MIGRATE_MAX_COLUMNS     64           /* columns of one copied table */
#define DPG_MIGRATE_SQL_BYTES       4096         /* one generated copy statement */
/* ==== end dpgate migrate ==== */

#endif
