/*
 * reload.h - moving to a new generation: rereading the file (reload.c),
 * the members of pools that are not in the file (members.c), and starting
 * or moving the health checks (checks.c). Main thread unless a comment
 * says otherwise.
 */
#ifndef LB_RELOAD_H
#define LB_RELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"

struct lb_daemon;
struct lb_gen;
struct dsc;

/* ------------------------------------------------------------- checks.c */

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
    bool is_ephemeral;                  /* API: deleted when its heartbeats
                                           stop (ephemeral_delete_after) */
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
        char endpoint[300];             /* etcd: the URL it talks to */
        int64_t revision;               /* etcd: the last revision read */
    } status;
    bool is_seen;                       /* lb_members_sync's mark */
};

int lb_members_init(struct lb_daemon *d);
void lb_members_fini(struct lb_daemon *d);
/* Appends the members of every pool of c (a copy of the file's config) to
 * its servers. -1 with err set when out of memory or a member is refused. */
int lb_members_apply(struct lb_daemon *d, struct conf *c, char *err, size_t errlen);
/* Each server's weight as the decision takes it (op.weight): the
 * configured one (the API's above 0 is in it already), 0 where the API
 * set 0 (the config keeps a weight of 1 or more). Before g's first
 * decision; caller holds state_lock, or is alone at start. */
void lb_members_weigh_gen(struct lb_daemon *d, struct lb_gen *g);
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
/* mb, an API member, in place of the pool's server of its name (which the
 * caller deletes): 0; 1 with *conflict when mb's address is another
 * server's; -1 when out of memory. */
int lb_members_api_replace(struct lb_daemon *d, const struct conf_pool *p,
                           const struct lb_member *mb, const char **conflict);
/* The API member name of pool, or NULL. Caller holds state_lock. */
const struct lb_member *lb_members_api_find(const struct lb_daemon *d, const char *pool,
                                            const char *name);
/* A weight for a server of any source, kept until it leaves the pool
 * (out of memory, the next generation keeps the one it had). */
void lb_members_weight_set(struct lb_daemon *d, const char *pool, const char *name,
                           uint32_t weight);
/* A hand-over (takeover.c): every pool's API and discovered members and
 * API weights as lines ("member api|ephemeral|dns POOL NAME ADDR WEIGHT
 * MAXCONN",
 * "weight POOL NAME WEIGHT"), malloc'd, NULL when out of memory; and one
 * such line taken back in by the new process, before its first
 * generation: 0, or -1 with err set. */
char *lb_members_text(struct lb_daemon *d, size_t *len);
int lb_members_adopt(struct lb_daemon *d, const char *line, char *err, size_t errlen);

/* ------------------------------------------------------------- reload.c */

/* What /stats and /metrics show of reloads: reload.c writes it under
 * state_lock. */
struct lb_reload_figures {
    uint64_t reloads_ok;
    uint64_t reloads_failed;
    char *reload_error;                 /* the last failure, NULL after a
                                           good reload */
    struct lb_gen **retired;            /* replaced generations that still
                                           have sessions (main's refs) */
    size_t nretired;
};
/* d's figures; caller holds state_lock and reads them under it. */
const struct lb_reload_figures *lb_reload_figures(const struct lb_daemon *d);

/* Allocates d->reload; main, first (a hand-over brings members before the
 * first generation). -1 when out of memory. Free after lb_reload_fini. */
int lb_reload_new(struct lb_daemon *d);
void lb_reload_free(struct lb_daemon *d);

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
/* Main's loop has ended: every request waiting for a reload is told "lb
 * is stopping" now, while the admin port can still send it. */
void lb_reload_stop(struct lb_daemon *d);
/* Worker `worker` now runs generation `number` (its acknowledgement of a
 * switch). Main thread. */
void lb_reload_on_switched(struct lb_daemon *d, unsigned worker, uint64_t number);

/* POST /reload and the admin API's members changes, on main: done(d,
 * arg, rc, msg) is called once with the outcome (rc 0 or -1, msg why) of
 * the reload that covers the request: the next file reload to start
 * (lb_reload_request), the next reload of either kind, which both apply
 * the members (lb_reload_members_request). Requests asked while a reload
 * runs are answered together by the one that comes after it. At exit,
 * requests still waiting get -1. Main thread. */
typedef void (*lb_reload_done_pt)(struct lb_daemon *d, void *arg, int rc, const char *msg);
void lb_reload_request(struct lb_daemon *d, lb_reload_done_pt done, void *arg);
void lb_reload_members_request(struct lb_daemon *d, lb_reload_done_pt done, void *arg);

#endif /* LB_RELOAD_H */
