/*
 * daemon.h - the process: the one object main builds and every thread
 * points to. Each capability keeps its own state behind its own header and
 * the daemon holds a pointer to it; what stays here is what every part
 * shares (the generation pointer, the lock, the workers, the mailboxes).
 *
 * Threads (see README, "Design"):
 *   - main: signals, start-up, shutdown, reloads, and the one thread that
 *     decides: health verdicts, operator actions, weights, members,
 *     heartbeats and /ready's verdict, applied under state_lock; owns the
 *     generation pointer.
 *   - workers (data/): the data path.
 *   - health threads (health/): probes; their results reach main through
 *     its results mailbox.
 *   - admin (admin/): the admin port; it posts each order to main (its
 *     orders mailbox, admin_order.c) and sends main's answer from its own
 *     mailbox, never waiting; it only reads state, under state_lock.
 * Threads talk through mailboxes (core/); shared figures are C11 atomics.
 *
 * Include this for the body of struct lb_daemon only: the calls of each
 * part are in its own header (state.h, reload.h, handover.h, tier.h,
 * data.h, admin.h).
 */
#ifndef LB_DAEMON_H
#define LB_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef LB_VERSION
#define LB_VERSION "dev"
#endif

struct event_base;
struct hc;
struct lb_admin;
struct lb_control;
struct lb_gen;
struct lb_mailbox;
struct lb_reload;
struct lb_state;
struct lb_takeover;
struct lb_tier;
struct lb_worker;
struct conf;

/* The cap on client connections across all workers (max_connections),
 * kept by the data path (data/worker.c). Workers reserve a slot before
 * each accept(2), so lb never accepts a connection it would have to drop. */
struct lb_limit {
    _Atomic uint32_t active;
    _Atomic uint32_t max;               /* a reload may change it */
    _Atomic bool paused;                /* listeners disabled at the cap */
    _Atomic uint64_t reached;           /* times accepts paused at the cap */
};

/* What the workers tell main, in the order told. */
enum lb_main_msg_kind {
    LB_MAIN_SWITCHED = 0,               /* worker now runs gen `number` */
    LB_MAIN_WORKER_EXIT,                /* a worker's loop ended */
    LB_MAIN_LIVE_ERROR,                 /* client traffic met an error at
                                           server `server` (outlier) */
};

struct lb_main_msg {
    enum lb_main_msg_kind kind;
    unsigned worker;
    uint64_t number;                    /* SWITCHED: the generation;
                                           LIVE_ERROR: when (monotonic ms) */
    uint64_t began;                     /* LIVE_ERROR: when its connection
                                           began (monotonic ms) */
    uint32_t server;                    /* LIVE_ERROR: the backend's id */
    unsigned error_kind;                /* LIVE_ERROR: enum bal_outlier_kind */
};

struct lb_daemon {
    struct lb_gen *gen;                 /* current generation (main's ref);
                                           swapped under state_lock */
    const char *path;                   /* the config file, for reloads */
    char exe[4096];                     /* this binary's path (SIGUSR2) */
    uint32_t next_id;                   /* next backend id (main) */
    struct lb_limit limit;
    struct lb_worker *workers;
    size_t nworkers;
    unsigned ncpus;                     /* CPUs lb may run on, at start: more
                                           workers take turns (worker.c) */
    struct event_base *base;            /* main thread */
    struct lb_mailbox *mailbox;         /* struct lb_main_msg, to main */
    size_t workers_running;             /* main */
    _Atomic uint64_t forced_closes;     /* sessions closed by shutdown_timeout */
    /* The health module, or NULL: published (release) once built and
     * started; workers read it (acquire) to ask for probes. */
    _Atomic(struct hc *) hc;
    struct lb_mailbox *results;         /* struct hc_result, to main */
    /* Main changes server state under this lock (every decision is
     * main's); the admin port copies what it shows under it. The data
     * path never takes it: it reads the balancer's atomics. */
    pthread_mutex_t state_lock;
    double started_at;                  /* unix seconds */
    struct conf *file_conf;             /* the file as last loaded (main;
                                           reload.c replaces it) */
    bool is_handed_over;                /* a new process took over (main) */

    /* Each part's own state, behind its header. */
    struct lb_state *state;             /* decisions (state/server.c) */
    struct lb_reload *reload;           /* reloads and members (reload/) */
    struct lb_tier *tier;               /* withdrawal and stop (tier/) */
    struct lb_admin *admin;             /* the admin port, or NULL */
    struct lb_control *control;         /* control_socket, or NULL */
    struct lb_takeover *takeover;       /* lb -x: what came, until "go" */
};

#endif /* LB_DAEMON_H */
