/*
 * lb.h - what the daemon's files share: the configuration generation, the
 * workers, sessions, logging and socket helpers.
 *
 * Threads (see README, "Design"):
 *   - main: signals, start-up and shutdown; owns the generation pointer.
 *   - workers (lb_worker): one event_base each; each owns its listeners, its
 *     sessions and its balancer cursors. No other thread touches them; other
 *     threads only set a flag and wake the worker with lb_worker_notify().
 * Fields written by several threads are C11 atomics and say so.
 */
#ifndef LB_H
#define LB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include "bal.h"
#include "conf.h"
#include "hc.h"

struct lb_daemon;
struct lb_admin;

#ifndef LB_VERSION
#define LB_VERSION "dev"
#endif

/* --------------------------------------------------------------- main.c */

/* Blocks the process signals in the calling thread (the previous mask in
 * *old, for pthread_sigmask(SIG_SETMASK)): threads created meanwhile
 * inherit the mask, so only main, where libevent handles them, takes them. */
void lb_signals_block(sigset_t *old);

/* ---------------------------------------------------------------- log.c */

/* The clocks the daemon shares: monotonic milliseconds (deadlines, detection
 * times; the same clock main and workers compare) and wall-clock seconds
 * (what /stats shows). Any thread. */
uint64_t lb_mono_ms(void);
double lb_wall_now(void);

/* Process-wide: the one piece of global mutable state besides shutdown. */
void lb_log_set_level(enum conf_log_level level);
bool lb_log_enabled(enum conf_log_level level);

/* Writes one line "ts=... level=... event=EVENT <fmt...>" to stderr with a
 * single write(2), so lines of different threads never interleave. fmt is
 * the key=value tail; values that may hold spaces or quotes go through
 * lb_log_quote(). Any thread. Use the lb_log() macro, which checks the
 * level before formatting. */
void lb_log_emit(enum conf_log_level level, const char *event,
                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define lb_log(level, event, ...)                                            \
    do {                                                                     \
        if (lb_log_enabled(level))                                           \
            lb_log_emit(level, event, __VA_ARGS__);                          \
    } while (0)

/* Returns s ready for a key=value log line: as is when it is a plain token,
 * otherwise double-quoted with quotes, backslashes and control characters
 * escaped (one event stays one line). Writes into buf (len bytes). */
const char *lb_log_quote(char *buf, size_t len, const char *s);

/* ---------------------------------------------------------------- net.c */

/* "host:port" / "[v6]:port" of a socket address, into buf. */
const char *lb_net_addr_text(const struct sockaddr *sa, char *buf, size_t len);

/* A non-blocking listening socket with SO_REUSEADDR, bound to addr. With
 * reuseport (frontends: one socket per worker, the kernel spreads accepts
 * over them) also SO_REUSEPORT. Returns the fd, or -1 with err set. */
int lb_net_listen(const struct sockaddr *addr, socklen_t len, bool reuseport,
                  char *err, size_t errlen);

/* Raises the soft RLIMIT_NOFILE to the hard one; returns the new limit. */
uint64_t lb_net_raise_fd_limit(void);

/* ---------------------------------------------------------------- gen.c */

/* What an operator asked for (admin port). */
enum lb_server_admin {
    LB_ADMIN_NONE = 0,                  /* health checks decide */
    LB_ADMIN_DRAIN,                     /* out; open connections finish */
    LB_ADMIN_DISABLE,                   /* out (maintenance) */
};

/* The state the admin port reports, derived from the inputs above by
 * lb_server_state() alone. */
enum lb_server_state {
    LB_SERVER_UP = 0,                   /* in rotation */
    LB_SERVER_DRAINING,                 /* out, connections still open */
    LB_SERVER_DOWN,                     /* out by health checks, none open */
    LB_SERVER_DISABLED,                 /* out by an operator, none open */
};

/* Fixed-bucket histogram in milliseconds, exported in seconds. */
#define LB_HIST_BUCKETS 15
extern const double lb_hist_bounds_ms[LB_HIST_BUCKETS];
struct lb_hist {
    uint64_t buckets[LB_HIST_BUCKETS];  /* not cumulative */
    uint64_t count;
    double sum_ms;
};
void lb_hist_observe(struct lb_hist *h, double ms);

/* What a server keeps across reloads: counters, health, operator state.
 * Shared by every generation that has the server (same pool, name and
 * address), refcounted by their struct lb_server entries.
 * Atomics: bumped by workers, read by anyone (relaxed: figures, not
 * synchronisation). The rest: main thread and admin thread, under
 * daemon->state_lock. */
struct lb_backend {
    _Atomic uint32_t refs;
    uint32_t id;                        /* health-check key, stable */

    _Atomic uint32_t active;            /* the balancer counts in here */
    _Atomic uint64_t total_connections;
    _Atomic uint64_t bytes_in;          /* from the server, to the client */
    _Atomic uint64_t bytes_out;         /* from the client, to the server */
    _Atomic uint64_t connect_failures;
    _Atomic uint64_t drained_by_timeout;  /* closed by drain_timeout/disable */
    _Atomic uint32_t live_failures;     /* consecutive failed connects of
                                           client traffic (observe_errors) */
    _Atomic uint64_t observed_probes;   /* out-of-schedule probes asked */
    /* main writes, workers read: when this server's open connections are
     * closed (monotonic ms; 0 = never: it is in rotation) */
    _Atomic uint64_t drain_deadline_ms;

    /* under state_lock */
    enum lb_server_admin admin;
    bool is_in_rotation;                /* mirrors the balancer's flag */
    bool is_guarded;                    /* failing, held by min_servers */
    bool is_removed;                    /* gone from the config (reload) */
    uint64_t down_since_ms;             /* start of the streak that took
                                           it down (guard ordering) */
    struct bal_health health;
    uint64_t last_seq;                  /* newest probe applied */
    struct lb_check_info {
        bool is_set;
        bool passed;
        char detail[HC_DETAIL_MAX];
        double duration_ms;
        double at;                      /* unix seconds */
    } last_check;
    double last_change;                 /* unix seconds */
    double last_detection_ms;           /* of the latest up/down change */
    uint64_t checks;
    double lag_ms_max;
};

/* A server as one generation configures it. */
struct lb_server {
    const struct conf_server *conf;     /* name, address, weight, line */
    struct lb_pool *pool;
    size_t index;                       /* in pool->bal->servers */
    struct lb_backend *b;               /* one reference */
};

/* Pool figures kept across reloads by pool name. */
struct lb_pool_stats {
    _Atomic uint32_t refs;
    struct lb_hist check_duration;      /* under daemon->state_lock */
};

struct lb_pool {
    const struct conf_pool *conf;
    struct lb_pool_stats *stats;        /* one reference */
    size_t index;                       /* in gen->pools */
    struct bal_pool *bal;
    struct lb_server *servers;          /* conf->nservers entries */
    size_t in_rotation;                 /* under daemon->state_lock */
    bool guard_active;                  /* under daemon->state_lock */
    struct bal_guard_server *guard_scratch; /* nservers, for the guard */
};

/* The listening sockets of one address: one per worker (SO_REUSEPORT, the
 * kernel spreads new connections over them). Bound by main; shared by every
 * generation whose frontends listen there, so a reload that keeps the
 * address never closes it. Worker i owns fds[i] once it uses the address,
 * and closes it itself when it moves to a generation without it. */
struct lb_listen {
    _Atomic uint32_t refs;
    struct conf_addr addr;
    size_t nfds;
    int fds[];                          /* -1 once closed */
};

/* Frontend counters, kept across reloads by frontend name. */
struct lb_fe_stats {
    _Atomic uint32_t refs;
    _Atomic uint64_t active_connections;
    _Atomic uint64_t total_connections;
};

struct lb_frontend {
    const struct conf_frontend *conf;
    struct lb_pool *pool;
    struct lb_listen *listen;           /* one reference */
    struct lb_fe_stats *stats;          /* one reference */
};

/* Configuration generation: everything built from one read of the file.
 * Immutable once built, except for the atomics above. Refcounted: the main
 * thread holds one reference, each worker one, each session one, so a
 * generation outlives every connection that started under it (reload). */
struct lb_gen {
    _Atomic uint32_t refs;
    uint64_t number;                    /* 1 at start, +1 per reload */
    struct conf *conf;                  /* owned */
    struct lb_pool *pools;              /* conf->npools */
    struct lb_frontend *frontends;      /* conf->nfrontends */
    struct lb_server **servers;         /* every server of every pool */
    size_t nservers;
    struct lb_server **by_id;           /* indexed by backend id (sparse) */
    size_t nby_id;
};

/* Builds a generation from a loaded config, taking ownership of conf (freed
 * with the generation, also on failure). old is the generation it replaces
 * (NULL at start): servers, frontend counters and listening sockets it
 * shares with the new one are kept, not rebuilt. New servers get ids from
 * *next_id; new addresses are bound here (nworkers sockets each). NULL with
 * err set on failure (a bind error names FILE:LINE). Main thread, with
 * state_lock held when old is not NULL. */
struct lb_gen *lb_gen_new(struct conf *conf, const struct lb_gen *old, size_t nworkers,
                          uint32_t *next_id, char *err, size_t errlen);
void lb_backend_unref(struct lb_backend *b);
struct lb_listen *lb_listen_new(const struct conf_addr *addr, size_t nworkers,
                                char *err, size_t errlen);
void lb_listen_unref(struct lb_listen *l);
void lb_gen_ref(struct lb_gen *g);
void lb_gen_unref(struct lb_gen *g);

/* ------------------------------------------------------------- server.c */

/* Health, as the main thread sees it; figures of the whole module. */
struct lb_health_stats {
    uint64_t checks;
    struct lb_hist lag;                 /* probe start against plan */
    struct lb_hist detection_down;      /* first failure -> removal */
    struct lb_hist detection_up;        /* first pass -> back in rotation */
};

/* Checks every server of g that has a check: starts the health module the
 * first time, and moves it to g's servers on a reload (kept servers keep
 * their schedule, new ones are probed at once, removed ones stop). Main
 * thread. -1 with err set, and then nothing changed. */
int lb_health_start(struct lb_daemon *d, const struct lb_gen *g, char *err, size_t errlen);
void lb_health_stop(struct lb_daemon *d);

/* The reported state; caller holds state_lock. */
enum lb_server_state lb_server_state(const struct lb_server *srv, uint32_t active);
const char *lb_server_state_name(enum lb_server_state s);

/* Recomputes a pool's rotation (after a reload); caller holds state_lock. */
void lb_pool_update(struct lb_daemon *d, struct lb_pool *pool, const char *reason);

/* A server that a reload removed: out of rotation, its connections drained
 * with its pool's drain_timeout. Caller holds state_lock. */
void lb_server_retire(struct lb_daemon *d, struct lb_server *srv);

/* ------------------------------------------------------------- reload.c */

/* Rereads the config file and moves to it, or keeps the old one and
 * records why. trigger names the cause for the log. Main thread. */
int lb_reload(struct lb_daemon *d, const char *trigger);
int lb_reload_init(struct lb_daemon *d);
/* SIGHUP: a reload soon; a burst of signals makes one. Main thread. */
void lb_reload_signal(struct lb_daemon *d);
void lb_reload_fini(struct lb_daemon *d);

/* POST /reload: asks main to reload and waits for the outcome. Returns the
 * reload's status (0 or -1) with its message in msg. Admin thread. */
int lb_reload_request(struct lb_daemon *d, char *msg, size_t len);

/* An operator's action; caller holds state_lock. */
void lb_server_set_admin(struct lb_daemon *d, struct lb_server *srv,
                         enum lb_server_admin admin);

/* -------------------------------------------------------------- admin.c */

/* Binds the admin port and starts its thread. Main thread. -1 with err. */
int lb_admin_start(struct lb_daemon *d, char *err, size_t errlen);
void lb_admin_stop(struct lb_daemon *d);

/* ------------------------------------------------------------- worker.c */

/* The cap on client connections across all workers (max_connections).
 * Workers reserve a slot before each accept(2), so lb never accepts a
 * connection it would have to drop. */
struct lb_limit {
    _Atomic uint32_t active;
    _Atomic uint32_t max;               /* a reload may change it */
    _Atomic bool paused;                /* listeners disabled at the cap */
};

struct lb_listener;
struct lb_session;
struct lb_buf;

struct lb_worker {
    /* set before the thread starts, then read-only */
    unsigned id;
    struct lb_daemon *daemon;
    struct lb_gen *gen;                 /* one reference */

    /* owned by the worker's thread */
    pthread_t thread;
    struct event_base *base;
    struct event *notify_ev;            /* other threads event_active() it */
    struct event *retry_accept_ev;      /* re-enables accepts after EMFILE */
    struct event *drain_ev;             /* next drain deadline */
    struct lb_listener *listeners;      /* one per frontend of gen */
    size_t nlisteners;
    struct bal_cursor **cursors;        /* one per pool of gen */
    struct lb_session *sessions;        /* doubly linked, for shutdown */
    size_t nsessions;
    struct lb_buf *free_bufs;           /* relay buffers kept for reuse */
    size_t nfree_bufs;
    bool is_stopping;
    bool is_accept_paused_emfile;
    uint64_t drain_epoch_seen;          /* daemon drain_epoch at last scan */

    /* written by other threads, read by the worker in its notify callback */
    _Atomic bool stop_requested;        /* close listeners, finish sessions */
    _Atomic bool force_requested;       /* shutdown_timeout: close them now */
    _Atomic(struct lb_gen *) pending_gen;   /* reload: the next generation,
                                               with a reference for us */
    _Atomic uint64_t gen_number;        /* the generation in use, for main */
};

/* The process: the one object main builds and every worker points to. */
struct lb_daemon {
    struct lb_gen *gen;                 /* current generation (main's ref);
                                           swapped under state_lock */
    const char *path;                   /* the config file, for reloads */
    uint32_t next_id;                   /* next backend id (main) */
    struct lb_limit limit;
    struct lb_worker *workers;
    size_t nworkers;
    struct event_base *base;            /* main thread */
    struct event *worker_exit_ev;       /* workers wake main when they end */
    struct event *shutdown_timer_ev;    /* shutdown_timeout, once stopping */
    _Atomic size_t workers_running;
    _Atomic uint64_t forced_closes;     /* sessions closed by shutdown_timeout */
    _Atomic uint64_t drain_epoch;       /* bumped when a server starts to
                                           drain: workers rescan then only */
    struct hc *hc;                      /* health checks, or NULL */
    struct event *health_ev;            /* health threads wake main */
    /* Health verdicts (main thread) and operator actions (admin thread)
     * change server state under this lock; the admin port reads under it.
     * The data path never takes it: it reads the balancer's atomics. */
    pthread_mutex_t state_lock;
    struct lb_health_stats health;      /* under state_lock */
    double started_at;                  /* unix seconds */
    struct lb_admin *admin;             /* the admin port, or NULL */

    /* reload (reload.c); counters and error under state_lock */
    uint64_t reloads_ok;
    uint64_t reloads_failed;
    char *reload_error;                 /* the last failure, NULL after a
                                           good reload */
    struct lb_gen **retired;            /* replaced generations that still
                                           have sessions (main's refs) */
    size_t nretired;
    struct event *retired_ev;           /* frees them once unused */
    struct event *reload_ev;            /* POST /reload asks main */
    struct event *hup_ev;               /* SIGHUP, coalesced */
    pthread_mutex_t reload_lock;        /* guards the three below */
    pthread_cond_t reload_cond;
    uint64_t reload_asked, reload_done; /* tickets of POST /reload */
    int reload_status;                  /* of the reload that ended last */
    char reload_message[1024];
};

/* Creates worker w's event base and its accept events on its socket of
 * every frontend of the generation. Main thread, before lb_worker_start.
 * -1 with err set. */
int lb_worker_init(struct lb_worker *w, struct lb_daemon *d, unsigned id,
                   char *err, size_t errlen);
int lb_worker_start(struct lb_worker *w);
void lb_worker_fini(struct lb_worker *w);     /* after the thread joined */

/* Wakes a worker so that it looks at its request flags and at the limit.
 * Any thread. */
void lb_worker_notify(struct lb_worker *w);
void lb_workers_notify(struct lb_daemon *d);     /* every worker */

/* Releases one slot of the connection cap; resumes accepting in every worker
 * when this ends a pause. Called by the worker that owned the session. */
void lb_limit_release(struct lb_daemon *d);

/* Relay buffers of the worker: allocated only while data is in flight. */
struct lb_buf *lb_worker_buf_get(struct lb_worker *w);
void lb_worker_buf_put(struct lb_worker *w, struct lb_buf *b);

/* Called by a session after it ended and unlinked itself (the worker ends
 * its loop during shutdown when it was the last one). */
void lb_worker_session_gone(struct lb_worker *w);

/* ------------------------------------------------------------ session.c */

#define LB_BUF_SIZE (64 * 1024)

struct lb_buf {
    struct lb_buf *next;                /* free list link */
    char data[LB_BUF_SIZE];
};

/* Starts a session for an accepted client fd (non-blocking) of frontend fe:
 * picks a server and connects. Takes ownership of fd; on failure closes it
 * and releases the connection slot. Worker thread. */
void lb_session_start(struct lb_worker *w, struct lb_frontend *fe, int fd,
                      const struct sockaddr *client, socklen_t client_len);

/* Closes a session at once (shutdown_timeout). Worker thread. */
void lb_session_abort(struct lb_session *s, const char *reason);

/* For the worker's drain scan: the next session of its list, the drain
 * deadline of the session's server (0 = none), and closing a session whose
 * deadline passed (counted as drained by timeout). Worker thread. */
struct lb_session *lb_session_next(const struct lb_session *s);
uint64_t lb_session_drain_deadline(const struct lb_session *s);
void lb_session_drain_close(struct lb_session *s);

#endif /* LB_H */
