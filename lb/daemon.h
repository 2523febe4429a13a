/*
 * daemon.h - the process: the one object main builds and every thread
 * points to, and what its parts reach through it.
 *
 * Threads (see README, "Design"):
 *   - main: signals, start-up, shutdown, reloads and every change of server
 *     state from health verdicts; owns the generation pointer.
 *   - workers (data/): the data path.
 *   - health threads (health/): probes; their results reach main through
 *     its results mailbox.
 *   - admin (admin/): the admin port; operator actions under state_lock.
 * Threads talk through mailboxes (core/); shared figures are C11 atomics.
 */
#ifndef LB_DAEMON_H
#define LB_DAEMON_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "core.h"
#include "control.h"
#include "data.h"

#ifndef LB_VERSION
#define LB_VERSION "dev"
#endif

struct lb_admin;
struct lb_control;
struct hc;

/* What other threads tell main, in the order told. */
enum lb_main_msg_kind {
    LB_MAIN_SWITCHED = 0,               /* worker now runs gen `number` */
    LB_MAIN_WORKER_EXIT,                /* a worker's loop ended */
    LB_MAIN_RELOAD,                     /* POST /reload */
    LB_MAIN_MEMBERS,                    /* the admin API changed members */
};

struct lb_main_msg {
    enum lb_main_msg_kind kind;
    unsigned worker;
    uint64_t number;
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
    struct event *shutdown_timer_ev;    /* shutdown_timeout, once stopping */
    struct event *withdraw_ev;          /* withdraw_delay, once withdrawing */
    _Atomic bool is_withdrawn;          /* a SIGTERM came: /ready says 503 */
    size_t workers_running;             /* main */
    _Atomic uint64_t forced_closes;     /* sessions closed by shutdown_timeout */
    /* The health module, or NULL: published (release) once built and
     * started; workers read it (acquire) to ask for probes. */
    _Atomic(struct hc *) hc;
    struct lb_mailbox *results;         /* struct hc_result, to main */
    /* Health verdicts (main thread) and operator actions (admin thread)
     * change server state under this lock; the admin port copies what it
     * shows under it. The data path never takes it: it reads the
     * balancer's atomics. */
    pthread_mutex_t state_lock;
    struct lb_health_stats health;      /* under state_lock */
    struct bal_member *decide_members;  /* scratch of the decision (server.c) */
    struct lb_server **decide_servers;
    size_t decide_cap;
    double started_at;                  /* unix seconds */
    struct lb_admin *admin;             /* the admin port, or NULL */
    struct lb_control *control;         /* control_socket, or NULL */
    struct lb_takeover *takeover;       /* lb -x: what came, until "go" */
    bool is_handed_over;                /* a new process took over (main) */
    struct event *tick_ev;              /* heartbeat expiry, slow start */

    /* reload (reload.c); counters, error and retired under state_lock */
    uint64_t reloads_ok;
    uint64_t reloads_failed;
    char *reload_error;                 /* the last failure, NULL after a
                                           good reload */
    struct lb_gen **retired;            /* replaced generations that still
                                           have sessions (main's refs) */
    size_t nretired;
    struct event *retired_ev;           /* frees them once unused */
    struct event *hup_ev;               /* SIGHUP, coalesced */
    struct event *warm_ev;              /* a reload's warm-up bound */
    struct event *settle_ev;            /* a reload waits for its file */
    struct lb_reload_run *reload_run;   /* the reload waiting for workers */
    bool is_reload_again;               /* asked while one was running */
    bool is_reload_again_file;          /* ... and one of them reads the file */
    const char *reload_again_trigger;
    struct conf *file_conf;             /* the file as last loaded (main) */

    /* the members of pools not in the file (members.c) */
    struct lb_members **members;        /* under state_lock */
    size_t nmembers;
    struct event *members_ev;           /* a set changed: a members reload */
    pthread_mutex_t reload_lock;        /* guards the four below */
    pthread_cond_t reload_cond;
    uint64_t reload_asked, reload_done; /* tickets of POST /reload */
    int reload_status;                  /* of the reload that ended last */
    char reload_message[1024];
    uint64_t members_asked, members_done;   /* tickets of the admin API's
                                               members changes */
    int members_status;
    char members_message[1024];
};

/* Stops accepting and drains the sessions for up to shutdown_timeout;
 * why names the cause for the log. Main thread. */
void lb_main_stop(struct lb_daemon *d, const char *why);

/* Blocks the process signals in the calling thread (the previous mask in
 * *old, for pthread_sigmask(SIG_SETMASK)): threads created meanwhile
 * inherit the mask, so only main, where libevent handles them, takes them. */
void lb_signals_block(sigset_t *old);

#endif /* LB_DAEMON_H */
