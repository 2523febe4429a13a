/*
 * state.h - server state and generations: building a generation (gen.c),
 * where health verdicts, operator actions and reloads turn into rotation
 * changes (server.c), and the state file (state.c). Main thread, under
 * daemon->state_lock unless a comment says otherwise (the admin thread
 * takes it to read, never writes).
 */
#ifndef LB_STATE_H
#define LB_STATE_H

#include "state_types.h"

struct lb_daemon;

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

/* The operator's inputs of the decision, each set alone (none writes
 * another: disable, weight 0, weight 5 leaves the server disabled), and
 * the pool decided: enable, drain or disable; the admin API's weight (0:
 * in the pool, no new connections); a delete through the API (out at
 * once, drains until the members reload takes it out of the pool).
 * Caller holds state_lock. */
void lb_server_set_admin(struct lb_daemon *d, struct lb_server *srv, enum bal_admin admin);
void lb_server_set_weight(struct lb_daemon *d, struct lb_server *srv, uint32_t weight);
void lb_server_delete(struct lb_daemon *d, struct lb_server *srv, const char *reason);
/* Many deletes in one pool, one decision: each marked, then the pool
 * decided once with the first as its cause (a sweep of 10,000 silent
 * servers is one decision, not 10,000). Caller holds state_lock. */
void lb_server_mark_deleted(struct lb_server *srv);
void lb_pool_decide_deleted(struct lb_daemon *d, struct lb_pool *pool, struct lb_server *first,
                            const char *reason);

/* A heartbeat from the server itself (POST .../heartbeat): it can take the
 * server out (fail), make it warning (warn), or let the probe decide
 * (pass); never more. note may be "". */
void lb_server_heartbeat(struct lb_daemon *d, struct lb_server *srv, enum bal_beat status,
                         const char *note);
/* What /stats calls its health: the probe's state, "warning" while the
 * decision says so, "down" while its heartbeat failed or expired. */
const char *lb_server_health_name(const struct lb_server *srv);
/* What a decision asks of the data path and the tier, which state/
 * reaches only through these (main passes their calls, so that data/,
 * which walks the generations, and state/ do not call each other): scan, a server's
 * open connections got a drain deadline (every worker scans its
 * sessions); kick, a pool's servers may have slots for its queue. */
typedef void (*lb_state_scan_pt)(struct lb_daemon *d);
typedef void (*lb_state_kick_pt)(struct lb_queue *q);
/* decided: rotation may have changed; what follows from it (/ready's
 * verdict, tier/) is worked out again. Caller holds state_lock. */
typedef void (*lb_state_decided_pt)(struct lb_daemon *d);
struct lb_state_data {
    lb_state_scan_pt scan;
    lb_state_kick_pt kick;
    lb_state_decided_pt decided;
};

/* Allocates d->state (data is copied) and starts the main thread's 100 ms
 * tick: heartbeats that expired take their server out, slow-start ramps
 * move on. Main thread, before the first decision; -1 when out of memory.
 * Fini stops the tick and frees it (NULL is fine). */
int lb_state_init(struct lb_daemon *d, const struct lb_state_data *data);
void lb_state_fini(struct lb_daemon *d);
/* Health figures of the whole module, as /stats shows them. Caller holds
 * state_lock. */
const struct lb_health_stats *lb_state_health(const struct lb_daemon *d);
/* A probe result for server srv of the current generation: rise/fall, and
 * the rotation change it causes. Caller holds state_lock. */
void lb_server_apply_check(struct lb_daemon *d, struct lb_server *srv,
                           const struct hc_result *r);
/* An agent's reply (r->id is srv's agent_id): a reply that parsed sets the
 * parts it carries (state, N%, maxconn, note) and the pool is decided when
 * the verdict moved; a failed one changes nothing. Caller holds
 * state_lock. */
void lb_server_apply_agent(struct lb_daemon *d, struct lb_server *srv,
                           const struct hc_result *r);
/* The connection cap in force: its agent's maxconn:N while it has an
 * agent that gave one, else its max_connections (0: none). */
uint32_t lb_server_cap(const struct lb_server *srv);
/* Its agent's verdict as the decision takes it: none without agent_port. */
struct bal_agent_verdict lb_server_agent(const struct lb_server *srv);

/* ------------------------------------------------------------ outlier.c */

/* An error client traffic met at the server with backend id `id` at at_ms
 * (monotonic), as a worker saw it, on a connection begun at began_ms:
 * counted in its window, and the server ejected (out of rotation, as a
 * failing probe: the guard may hold it) when its pool's outlier says so
 * and max_eject has room. Ignored when the current generation has no such
 * server, for a pool without outlier, and for a connection begun before
 * the server's last ejection ended. Caller holds state_lock. */
void lb_server_live_error(struct lb_daemon *d, uint32_t id, enum bal_outlier_kind kind,
                          uint64_t at_ms, uint64_t began_ms);
/* Why it was last ejected (or refused by the cap): "outlier: 5 connect
 * timeouts in 10 s". Caller holds state_lock. */
int lb_server_eject_reason(const struct lb_server *srv, char *buf, size_t len);

/* -------------------------------------------------------------- state.c */

/* [global] state_file. Save writes every server's health and
 * operator state (takes state_lock); load, at start before the first
 * decision, gives the servers of g found there their saved state. Main
 * thread; failures are logged, never fatal. */
void lb_state_save(struct lb_daemon *d);
void lb_state_load(struct lb_daemon *d, struct lb_gen *g);
#define LB_STATE_LINE_MAX 512           /* a state or member line, at most */
/* Every server whose state is known, one bal_saved line each, in a
 * malloc'd text of *len bytes (*n lines); NULL when out of memory. Takes
 * state_lock. The state file's body and a hand-over's (takeover.c): the
 * file leaves the ephemeral servers out (with_ephemeral false), since a
 * restarted lb has none until they register again. */
char *lb_state_lines(struct lb_daemon *d, bool with_ephemeral, size_t *len, size_t *n);
/* Gives the servers of g found in saved[] (same pool, name, address) their
 * saved state, before the first decision; is_handed_over marks them as
 * known (their first probe is spread, not at once). Returns how many. */
size_t lb_state_apply(struct lb_gen *g, const struct bal_saved *saved, size_t n,
                      bool is_handed_over);

#endif /* LB_STATE_H */
