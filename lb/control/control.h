/*
 * control.h - the control of server state and generations: what one read
 * of the config builds (a generation), where health verdicts, operator
 * actions and reloads turn into rotation changes, and the link to the
 * health module. Main thread, and the admin thread for operator actions,
 * under daemon->state_lock unless a comment says otherwise.
 */
#ifndef LB_CONTROL_H
#define LB_CONTROL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bal.h"
#include "conf.h"
#include "hc.h"

struct lb_daemon;

/* Fixed-bucket histogram in milliseconds, exported in seconds. */
#define LB_HIST_BUCKETS 15
extern const double lb_hist_bounds_ms[LB_HIST_BUCKETS];
struct lb_hist {
    uint64_t buckets[LB_HIST_BUCKETS];  /* not cumulative */
    uint64_t count;
    double sum_ms;
};
void lb_hist_observe(struct lb_hist *h, double ms);
/* The same, observed by any thread (the workers) without a lock; read
 * into a struct lb_hist for printing. */
struct lb_ahist {
    _Atomic uint64_t buckets[LB_HIST_BUCKETS];
    _Atomic uint64_t count;
    _Atomic uint64_t sum_us;
};
void lb_ahist_observe(struct lb_ahist *h, uint64_t us);
void lb_ahist_read(const struct lb_ahist *h, struct lb_hist *out);

/* A heartbeat's note, as shown in /stats and the logs. */
#define LB_BEAT_NOTE_MAX 128

/* What a server keeps across reloads: its place in rotation and open
 * connections (the balancer's struct bal_live, which every generation's
 * pool points to), counters, health and operator state. Shared by every
 * generation that has the server (same pool, name and address), refcounted
 * by their struct lb_server entries.
 * Atomics: bumped by workers, read by anyone (relaxed: figures, not
 * synchronisation). The rest: under daemon->state_lock. */
struct lb_backend {
    _Atomic uint32_t refs;
    uint32_t id;                        /* health-check key, stable */

    struct bal_live live;               /* in_rotation: written under
                                           state_lock, from the decision
                                           only */
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

    /* under state_lock: the inputs of the decision ... */
    enum bal_admin admin;
    bool is_removed;                    /* gone from the config (reload) */
    bool is_decided;                    /* placed by a decision once */
    bool is_handed_over;                /* state from the process lb -x
                                           replaced: no probe at once */
    uint64_t down_since_ms;             /* start of the streak that took
                                           it down (guard ordering) */
    struct bal_health health;
    /* ... and of its outputs what is not in live */
    bool is_guarded;                    /* failing, held by min_servers */
    uint64_t last_seq;                  /* newest probe applied */
    struct lb_check_info {
        bool is_set;
        bool passed;
        bool is_warning;                /* passed with a code in check_warn */
        char detail[HC_DETAIL_MAX];
        double duration_ms;
        double at;                      /* unix seconds */
    } last_check;
    /* heartbeats (heartbeat_ttl): the last report, PASS until one comes
     * (a server has one TTL from when its pool first needs one) */
    enum bal_beat beat;
    bool is_beat_expired;               /* FAIL because none came in time */
    bool is_beat_news;                  /* changed, not decided yet */
    uint64_t beat_at_ms;                /* monotonic; 0 = not looked at yet */
    double beat_at;                     /* unix seconds; 0 = none reported */
    char beat_note[LB_BEAT_NOTE_MAX];
    uint64_t heartbeats;
    /* decided: warning (published, for its logs) and the slow start */
    bool is_warning;
    uint64_t ramp_since_ms;             /* 0 = not ramping */
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

/* A pool's clients waiting for a connection slot while every server in
 * rotation is at its max_connections (data/queue.c). One per pool name,
 * shared by every worker and generation: first come, first served. */
struct lb_waiter;
struct lb_queue {
    pthread_mutex_t lock;               /* the list, grants and figures */
    struct lb_waiter *head, *tail;      /* oldest first */
    _Atomic uint32_t depth;             /* read without the lock: is anyone
                                           waiting? */
    uint64_t queued_total;              /* clients that waited */
    uint64_t timeouts_total;            /* ... and gave up (queue_timeout) */
    uint64_t full_total;                /* refused: queue_max reached */
    struct lb_hist wait;                /* enqueue to slot, served ones */
    size_t kick_from;                   /* where a kick's server scan starts */
};

/* What a pool keeps across reloads by name: figures and its queue. */
struct lb_pool_shared {
    _Atomic uint32_t refs;
    struct lb_hist check_duration;      /* under daemon->state_lock */
    struct lb_ahist connect_time;       /* accept to the server's connect */
    struct lb_ahist session_duration;   /* accept to close */
    struct lb_queue queue;
    /* heartbeats, under state_lock: past a few decisions a tick, changes
     * wait for the tick (server.c, lb_beat_decide) */
    uint64_t beat_window_ms;
    uint32_t beat_decisions;
    bool has_beat_news;
};

struct lb_pool {
    const struct conf_pool *conf;
    struct lb_pool_shared *shared;      /* one reference */
    size_t index;                       /* in gen->pools */
    struct bal_pool *bal;
    struct lb_server *servers;          /* conf->nservers entries */
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
    _Atomic uint64_t retries;           /* connect attempts after a failed one */
    _Atomic uint64_t no_server;         /* closed without a server */
    _Atomic uint64_t accept_failures;   /* accept(2) out of descriptors, memory */
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
    struct lb_gen_index {               /* servers by pool and name */
        struct lb_server **slots;
        size_t mask;
    } index;
};

/* ---------------------------------------------------------------- gen.c */

/* Builds a generation from a loaded config, taking ownership of conf (freed
 * with the generation, also on failure). old is the generation it replaces
 * (NULL at start): servers, frontend counters and listening sockets it
 * shares with the new one are kept, not rebuilt. New servers get ids from
 * *next_id and are out of rotation until the first decision places them;
 * new addresses are bound here (nworkers sockets each), once proved free:
 * an address another socket listens on fails with "FILE:LINE: ADDR is
 * already in use" (the line of the frontend's listen). NULL with err set
 * on failure. Main thread; needs no lock (it only adds references to what
 * old shares). The listening sockets in adopt[] (those a hand-over
 * brought, or none) serve the frontends on their addresses before any
 * bind: each used one gains a reference. */
struct lb_gen *lb_gen_new(struct conf *conf, const struct lb_gen *old,
                          struct lb_listen *const *adopt, size_t nadopt, size_t nworkers,
                          uint32_t *next_id, char *err, size_t errlen);
/* The sockets a hand-over brought for one address (fds[0..n), taken over:
 * closed on failure too) as the nworkers sockets of a listen set: the
 * first nworkers of them, and more bound to the same address when there
 * are fewer. NULL with err set. Main thread. */
struct lb_listen *lb_listen_adopt(const int *fds, size_t n, size_t nworkers, char *err,
                                  size_t errlen);
void lb_listen_unref(struct lb_listen *l);
void lb_gen_ref(struct lb_gen *g);
void lb_gen_unref(struct lb_gen *g);
/* Server `server` of pool `pool` in g (NULL: none, or g is NULL): one hash
 * lookup. */
struct lb_server *lb_gen_find_server(const struct lb_gen *g, const char *pool,
                                     const char *server);

/* ------------------------------------------------------------- server.c */

/* Places every server of a just built generation g (start, or a reload
 * replacing old, whose servers g does not have are removed: they leave
 * rotation and drain with their pool's drain_timeout). With warm_hold, a
 * removed server that serves stays in rotation while its pool has servers
 * waiting for their first probe (bal_rotation_decide); *warm_held counts
 * them. Returns how many were removed. Caller holds state_lock (or is
 * alone, at start). */
size_t lb_gen_decide(struct lb_daemon *d, struct lb_gen *g, const struct lb_gen *old,
                     bool warm_hold, size_t *warm_held);
/* True while a server of g under health control waits for its first
 * probe. Caller holds state_lock. */
bool lb_gen_is_warming(const struct lb_gen *g);
/* Makes room for lb_gen_decide(d, g, old) and for every later decision on
 * g, before a reload commits. -1 when out of memory. */
int lb_gen_decide_reserve(struct lb_daemon *d, const struct lb_gen *g, const struct lb_gen *old);

/* An operator's action; caller holds state_lock. */
void lb_server_set_admin(struct lb_daemon *d, struct lb_server *srv, enum bal_admin admin);

/* A probe result for server srv of the current generation: rise/fall, and
 * the rotation change it causes. Caller holds state_lock. */
/* A heartbeat from the server itself (POST .../heartbeat): it can take the
 * server out (fail), make it warning (warn), or let the probe decide
 * (pass); never more. note may be "". */
void lb_server_heartbeat(struct lb_daemon *d, struct lb_server *srv, enum bal_beat status,
                         const char *note);
/* What /stats calls its health: the probe's state, "warning" while the
 * decision says so, "down" while its heartbeat failed or expired. */
const char *lb_server_health_name(const struct lb_server *srv);
/* state.c: [global] state_file. Save writes every server's health and
 * operator state (takes state_lock); load, at start before the first
 * decision, gives the servers of g found there their saved state. Main
 * thread; failures are logged, never fatal. */
void lb_state_save(struct lb_daemon *d);
void lb_state_load(struct lb_daemon *d, struct lb_gen *g);
#define LB_STATE_LINE_MAX 512           /* a state or member line, at most */
/* Every server whose state is known, one bal_saved line each, in a
 * malloc'd text of *len bytes (*n lines); NULL when out of memory. Takes
 * state_lock. The state file's body and a hand-over's (takeover.c). */
char *lb_state_lines(struct lb_daemon *d, size_t *len, size_t *n);
/* Gives the servers of g found in saved[] (same pool, name, address) their
 * saved state, before the first decision; is_handed_over marks them as
 * known (their first probe is spread, not at once). Returns how many. */
size_t lb_state_apply(struct lb_gen *g, const struct bal_saved *saved, size_t n,
                      bool is_handed_over);

/* The main thread's 100 ms tick (lb_server_tick_init): heartbeats that
 * expired take their server out, slow-start ramps move on. */
int lb_server_tick_init(struct lb_daemon *d);
void lb_server_tick_fini(struct lb_daemon *d);
void lb_server_apply_check(struct lb_daemon *d, struct lb_server *srv,
                           const struct hc_result *r);

/* ------------------------------------------------------------- checks.c */

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
 * thread, without state_lock (it may load CA files). -1 with err set, and
 * then nothing changed. */
int lb_health_start(struct lb_daemon *d, const struct lb_gen *g, char *err, size_t errlen);
void lb_health_stop(struct lb_daemon *d);

/* ------------------------------------------------------------ members.c */

/* A server of a pool that is not in the file (discovered, or added by the
 * API), as a server line would give it. */
struct lb_member {
    char name[CONF_NAME_MAX + 1];
    char address[sizeof(((struct conf_addr *)0)->text)];
    uint32_t weight;
    uint32_t max_connections;
};

/* The members of one pool, by pool name; kept across reloads while the
 * pool exists. Lists and status: main writes under state_lock. */
struct lb_members {
    char pool[CONF_NAME_MAX + 1];
    struct lb_daemon *d;
    struct dsc *dsc;                    /* its discovery, or NULL */
    struct lb_member *dns;              /* the last good answer */
    size_t ndns;
    struct lb_member *api;
    size_t napi;
    struct lb_member *weights;          /* the admin API's weights, by
                                           server name (0: drained) */
    size_t nweights;
    struct lb_discover_status {
        uint64_t successes, failures;
        double last_success, last_failure;  /* unix seconds, 0 = never */
        char last_error[160];           /* of the last failed round */
        bool is_failing;                /* the last round failed */
    } status;
    bool is_seen;                       /* lb_members_sync's mark */
};

int lb_members_init(struct lb_daemon *d);
void lb_members_fini(struct lb_daemon *d);
/* Appends the members of every pool of c (a copy of the file's config) to
 * its servers. -1 with err set when out of memory or a member is refused. */
int lb_members_apply(struct lb_daemon *d, struct conf *c, char *err, size_t errlen);
/* After a commit of the file c: starts, keeps or stops each pool's
 * discovery. Main thread, not from a discovery callback. */
void lb_members_sync(struct lb_daemon *d, const struct conf *c);
/* The members of pool, or NULL. Caller holds state_lock. */
const struct lb_members *lb_members_of(const struct lb_daemon *d, const char *pool);
/* The admin API's changes; caller holds state_lock, then asks for a
 * members reload (lb_reload_members_request). Adding mb to pool p (of the
 * current generation): 0; 1 with *conflict saying why when its name or
 * address is in the pool or on its way there; -1 when out of memory. */
int lb_members_api_add(struct lb_daemon *d, const struct conf_pool *p, const struct lb_member *mb,
                       const char **conflict);
bool lb_members_api_remove(struct lb_daemon *d, const char *pool, const char *name);
/* A weight for a server of any source, kept until it leaves the pool;
 * returns the weight it had from the API before (UINT32_MAX: none). */
uint32_t lb_members_weight_set(struct lb_daemon *d, const char *pool, const char *name,
                               uint32_t weight);
/* A hand-over (takeover.c): every pool's API and discovered members and
 * API weights as lines ("member api|dns POOL NAME ADDR WEIGHT MAXCONN",
 * "weight POOL NAME WEIGHT"), malloc'd, NULL when out of memory; and one
 * such line taken back in by the new process, before its first
 * generation: 0, or -1 with err set. */
char *lb_members_text(struct lb_daemon *d, size_t *len);
int lb_members_adopt(struct lb_daemon *d, const char *line, char *err, size_t errlen);

/* ------------------------------------------------------------- reload.c */

/* Rereads the config file and moves to it, or keeps the old one and
 * records why. trigger names the cause for the log. Main thread. */
void lb_reload(struct lb_daemon *d, const char *trigger);
/* The same without reading the file: the file's last config with the
 * members as they are now (members.c). Not counted as a reload. */
void lb_reload_members(struct lb_daemon *d, const char *trigger);
int lb_reload_init(struct lb_daemon *d);
/* SIGHUP: a reload soon; a burst of signals makes one. Main thread. */
void lb_reload_signal(struct lb_daemon *d);
void lb_reload_fini(struct lb_daemon *d);
/* Worker `worker` now runs generation `number` (its acknowledgement of a
 * switch). Main thread. */
void lb_reload_on_switched(struct lb_daemon *d, unsigned worker, uint64_t number);
/* A reload that warms new servers before the switch: ends the warm-up when
 * none is pending any more (is_bound: at its time bound, whatever they
 * are). Main thread. */
void lb_reload_warm_check(struct lb_daemon *d, bool is_bound);

/* POST /reload: asks main to reload and waits for the outcome. Returns the
 * reload's status (0 or -1) with its message in msg. Admin thread. */
int lb_reload_request(struct lb_daemon *d, char *msg, size_t len);
/* The same for a members reload, after the admin API changed members. */
int lb_reload_members_request(struct lb_daemon *d, char *msg, size_t len);

/* ----------------------------------------------------------- takeover.c */

/* What a hand-over (lb -x) brought: the running process's sockets, its
 * servers' states and its pools' members. */
struct lb_takeover;

/* The new process: connects to the control socket at path and takes the
 * running process's answer (its listen sets adopted for nworkers). NULL
 * with err set: nothing was taken, the running process serves on. */
struct lb_takeover *lb_takeover_receive(const char *path, size_t nworkers, char *err,
                                        size_t errlen);
void lb_takeover_free(struct lb_takeover *t);
/* d->takeover's members into d, before the first generation is built. */
int lb_takeover_members(struct lb_daemon *d, char *err, size_t errlen);
/* Its listen sets, for lb_gen_new (none without a hand-over). */
struct lb_listen *const *lb_takeover_listens(const struct lb_daemon *d, size_t *n);
/* Its servers' states into g, before the first decision. */
void lb_takeover_state(struct lb_daemon *d, struct lb_gen *g);
/* Its admin socket when it is bound to addr (taken: -1 the next time). */
int lb_takeover_admin_fd(struct lb_daemon *d, const struct conf_addr *addr);
/* Once serving: tells the old process to stop accepting and drain, waits
 * for its word and frees d->takeover. */
void lb_takeover_finish(struct lb_daemon *d);

/* SIGUSR2: starts the binary this process was started from, as it is on
 * disk now (an upgraded package's), with -c CONFIG -x: it takes over. */
void lb_takeover_spawn(struct lb_daemon *d);

/* The control socket ([global] control_socket), on main's loop: the
 * socket of a hand-over or a fresh one. -1 with err set (another lb
 * answers at the path). Stop unlinks it unless it was handed over. */
int lb_control_start(struct lb_daemon *d, char *err, size_t errlen);
void lb_control_stop(struct lb_daemon *d);

#endif /* LB_CONTROL_H */
