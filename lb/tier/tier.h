/*
 * tier.h - lb as one node of a tier behind a routing layer (BGP, VRRP, a
 * load balancer in front): whether it is ready to take traffic (/ready),
 * and how it leaves: SIGTERM withdraws for withdraw_delay while it still
 * serves, then stops accepting and drains for up to shutdown_timeout.
 * Main thread unless a comment says otherwise.
 */
#ifndef LB_TIER_H
#define LB_TIER_H

#include <stdbool.h>

struct lb_daemon;

/* Allocates d->tier; before the admin port starts. -1 when out of memory.
 * Fini frees it (NULL is fine), once the admin port stopped. */
int lb_tier_init(struct lb_daemon *d);
void lb_tier_fini(struct lb_daemon *d);

/* SIGTERM or SIGINT (sig): SIGTERM withdraws first (withdraw_delay), SIGINT
 * stops at once; a second signal cuts the wait short. */
void lb_tier_on_signal(struct lb_daemon *d, int sig);
/* Stops accepting and drains the sessions for up to shutdown_timeout; why
 * names the cause for the log. */
void lb_tier_stop(struct lb_daemon *d, const char *why);
/* A new process took over (lb -x): /ready says 503 from now on. */
void lb_tier_handed_over(struct lb_daemon *d);
/* Draining (lb_tier_stop ran); leaving: draining or withdrawing. */
bool lb_tier_is_stopping(const struct lb_daemon *d);
bool lb_tier_is_leaving(const struct lb_daemon *d);

/* /ready's verdict, an output of main's decisions: main works it out
 * and publishes it after each decision, generation swap, withdrawal and
 * hand-over (lb_tier_publish: main, caller holds state_lock; state/
 * reaches it through lb_state_data). lb_tier_ready reads what was
 * published: true when lb takes traffic; else false, and each reason is
 * told to reason(arg, text) in turn (under state_lock, which it takes).
 * Any thread. */
void lb_tier_publish(struct lb_daemon *d);
typedef void (*lb_tier_reason_pt)(void *arg, const char *reason);
bool lb_tier_ready(struct lb_daemon *d, lb_tier_reason_pt reason, void *arg);

#endif /* LB_TIER_H */
