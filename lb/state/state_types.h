/*
 * state_types.h - what one read of the config builds (a generation: its
 * pools, servers, frontends and listening sockets) and what a server keeps
 * across generations. Types only: the data path (data/) walks them on
 * every pick and state/ decides on them, so both include this, and
 * neither needs the other's prototypes for it (STYLE.md, section 1).
 */
#ifndef LB_STATE_TYPES_H
#define LB_STATE_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bal.h"
#include "bal_outlier.h"
#include "conf.h"
#include "core.h"
#include "data.h"               /* enum lb_deny_reason */
#include "hc.h"

/* A heartbeat's note, as shown in /stats and the logs. */
#define LB_BEAT_NOTE_MAX 128

/* A probe's or an agent's last result, as /stats shows it. */
struct lb_check_info {
    bool is_set;
    bool passed;
    bool is_warning;                    /* passed with a code in check_warn */
    char detail[HC_DETAIL_MAX];
    double duration_ms;
    double at;                          /* unix seconds */
};

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
    _Atomic uint64_t udp_datagrams_sent;        /* to the server */
    _Atomic uint64_t udp_datagrams_received;    /* from it */
    /* errors of client traffic, by kind (enum bal_outlier_kind): counted
     * whether its pool has outlier on or not */
    _Atomic uint64_t live_errors[BAL_OUTLIER_KINDS];
    /* main writes, workers read: out of rotation because it fails (its
     * probes, heartbeat, agent's down, or an ejection), not by an operator
     * or a reload: its UDP flows move to another server at their next
     * datagram */
    _Atomic bool is_failing;
    /* main writes, workers read: when this server's open connections are
     * closed (monotonic ms; 0 = never: it is in rotation) */
    _Atomic uint64_t drain_deadline_ms;

    /* under state_lock, written by main: the inputs of the decision ... */
    struct bal_operator op;             /* admin, weight (0: drains),
                                           deleted through the API */
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
    /* The parts most servers never need, allocated at their first use
     * (state/server.c, outlier.c): 700 bytes a server kept inline. NULL
     * until then, or when out of memory (the text is not kept; the
     * verdict it came with still counts). */
    struct lb_check_info *last_check;   /* its probe's, once one finished */
    /* heartbeats (heartbeat_ttl): the last report, PASS until one comes
     * (a server has one TTL from when its pool first needs one) */
    enum bal_beat beat;
    bool is_beat_expired;               /* FAIL because none came in time */
    bool is_delete_held;                /* ephemeral, silent past its delete
                                           time, held by the guard (logged) */
    bool is_beat_news;                  /* changed, not decided yet */
    uint64_t beat_at_ms;                /* monotonic; 0 = not looked at yet */
    double beat_at;                     /* unix seconds; 0 = none reported */
    char *beat_note;                    /* LB_BEAT_NOTE_MAX bytes, once a
                                           report came */
    uint64_t heartbeats;
    /* its agent (agent_port=): the last verdict, kept while the agent
     * cannot be reached or says what does not parse */
    bool has_agent_id;
    uint32_t agent_id;                  /* the agent check's key, given at
                                           the first generation with an
                                           agent_port (by_id has it too) */
    struct bal_agent_verdict agent;
    bool has_agent_maxconn;             /* its cap is the agent's ... */
    uint32_t agent_maxconn;             /* ... maxconn:N (0: none) */
    char *agent_note;                   /* HC_AGENT_NOTE_MAX + 1 bytes, once
                                           its agent gave a note */
    uint64_t agent_seq;                 /* newest agent reply applied */
    uint64_t agent_checks;
    struct lb_check_info *last_agent;   /* once its agent answered */
    /* outlier detection (pool key outlier, state/outlier.c): the errors in
     * its window, and its ejections */
    struct bal_outlier *outlier;        /* once it had an error in a pool
                                           with outlier */
    bool is_ejected;                    /* out until eject_until_ms: the
                                           decision's input */
    bool is_outlier_news;               /* back, not decided yet */
    uint64_t ejected_at_ms;             /* monotonic: its failure's start,
                                           for the guard's order */
    uint64_t eject_until_ms;
    uint64_t ejections[BAL_OUTLIER_KINDS];  /* by the kind that weighed
                                               most */
    uint64_t ejections_refused;         /* by max_eject */
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
    bool has_ejected;                   /* under state_lock: a server of the
                                           pool may be ejected (the tick
                                           looks for the end of its time) */
};

struct lb_pool {
    const struct conf_pool *conf;
    struct lb_pool_shared *shared;      /* one reference */
    size_t index;                       /* in gen->pools */
    struct bal_pool *bal;
    struct lb_server *servers;          /* conf->nservers entries */
    bool serves_udp;                    /* a UDP frontend sends it flows */
};

/* The listening sockets of one address: one per worker (SO_REUSEPORT, the
 * kernel spreads new connections over them). Bound by main; shared by every
 * generation whose frontends listen there, so a reload that keeps the
 * address never closes it. Worker i owns fds[i] once it uses the address,
 * and closes it itself when it moves to a generation without it. */
struct lb_listen {
    _Atomic uint32_t refs;              /* the generations that listen on it
                                           (and the hand-over's list) */
    _Atomic uint32_t weak;              /* keeps only the struct: the gone
                                           lists of generations, plus one
                                           for all of refs */
    struct conf_addr addr;
    int type;                           /* SOCK_STREAM, SOCK_DGRAM */
    size_t nfds;
    _Atomic uint32_t nopen;             /* its sockets not closed yet,
                                           retiring ones included (main
                                           reads it: lb_gen_retires) */
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
    _Atomic uint64_t denied[LB_DENY_REASONS];       /* refused clients, by reason */
    _Atomic uint64_t proxy_bad[LB_PROXY_BADS];      /* refused PROXY headers */
    struct lb_sources *sources;         /* per-source counts (data.h), made by
                                           the first generation that set a
                                           per-source limit; NULL before */
    /* routed by name (route lines) */
    _Atomic uint64_t route_default[LB_ROUTE_FALLBACKS];  /* to default_pool */
    _Atomic uint64_t route_closed[LB_ROUTE_FALLBACKS];   /* closed: no route */
    _Atomic uint64_t sni_bad[LB_SNI_BADS];               /* unroutable first
                                                            flights, by why */
    /* protocol = udp (data/udp.c) */
    _Atomic uint32_t udp_flows;                 /* open, every worker's */
    _Atomic uint64_t udp_flows_total;
    _Atomic uint64_t udp_flows_evicted;         /* past udp_max_flows */
    _Atomic uint64_t udp_datagrams_received;    /* from clients */
    _Atomic uint64_t udp_datagrams_sent;        /* to clients */
    _Atomic uint64_t udp_bytes_received;
    _Atomic uint64_t udp_bytes_sent;
    _Atomic uint64_t udp_dropped[LB_UDP_DROPS];
};

/* A route's count, kept across reloads by frontend name and pattern. */
struct lb_route_stats {
    _Atomic uint32_t refs;
    _Atomic uint64_t sessions;
};

struct lb_route {
    const struct conf_route *conf;
    struct lb_pool *pool;
    struct lb_route_stats *stats;       /* one reference */
};

struct lb_frontend {
    const struct conf_frontend *conf;
    struct lb_pool *pool;               /* NULL when routed by name */
    struct lb_route *routes;            /* conf->routes.n, in its order */
    struct lb_pool *default_pool;       /* NULL: none */
    uint32_t max_attempts;              /* the most retries + 1 of its pools:
                                           a session's room before its pool
                                           is known */
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
    struct lb_listen **gone;            /* addresses dropped by this or an
                                           earlier generation whose sockets
                                           were not all closed yet (one weak
                                           reference each) */
    size_t ngone;
};

/* Health, as the main thread sees it; figures of the whole module. */
struct lb_health_stats {
    uint64_t checks;
    struct lb_hist lag;                 /* probe start against plan */
    struct lb_hist detection_down;      /* first failure -> removal */
    struct lb_hist detection_up;        /* first pass -> back in rotation */
};

#endif /* LB_STATE_TYPES_H */
