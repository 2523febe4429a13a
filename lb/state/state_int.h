/*
 * state_int.h - what the files of state/ share and nothing else calls:
 * the one way a pool is decided (server.c), for outlier.c.
 */
#ifndef LB_STATE_INT_H
#define LB_STATE_INT_H

#include "state_types.h"

struct lb_daemon;

/* Decides the whole pool because server cause's input of kind changed
 * (cause NULL: BAL_CAUSE_TIME), logs each move with reason (NULL: each
 * server's heartbeat), and tells the data path and the tier. Caller holds
 * state_lock. */
void lb_pool_decide(struct lb_daemon *d, struct lb_pool *pool, enum bal_cause kind,
                    const struct lb_server *cause, const char *reason, double detection_ms);

/* outlier.c: the tick's part, for one pool of the current generation:
 * servers whose eject time is over come back (all of them when the pool's
 * outlier went off in a reload). */
void lb_outlier_tick(struct lb_daemon *d, struct lb_pool *pool, uint64_t now);

#endif /* LB_STATE_INT_H */
