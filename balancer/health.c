/*
 * health.c - a server's health state machine: rise and fall thresholds over
 * consecutive probe results. Pure: results and times come in as arguments.
 *
 *            pass                      fail x fall
 *   STARTING -----> UP  <------------------------------+
 *      |             |  ---------------------------+   |
 *      | fail        |         fail x fall         |   | pass x rise
 *      +-------------+-------------------------> DOWN -+
 *
 * STARTING counts as up (a fresh start serves at once), but its first
 * failure takes the server down without waiting for fall: nothing is known
 * of it yet, and sending traffic to it until fall probes have failed would
 * only give clients errors.
 *
 * PENDING (a server added by a reload) counts as down: its first pass
 * brings it up, its first failure makes it plainly DOWN.
 */
#include "bal.h"

static const char *const bal_health_state_names[] = {
    [BAL_HEALTH_STARTING] = "starting",
    [BAL_HEALTH_UP] = "up",
    [BAL_HEALTH_DOWN] = "down",
    [BAL_HEALTH_PENDING] = "pending",
};

void
bal_health_init(struct bal_health *h, uint32_t rise, uint32_t fall)
{
    *h = (struct bal_health){ .state = BAL_HEALTH_STARTING,
                              .rise = rise ? rise : 1,
                              .fall = fall ? fall : 1 };
}

const char *
bal_health_state_name(enum bal_health_state s)
{
    return s <= BAL_HEALTH_PENDING ? bal_health_state_names[s] : "unknown";
}

void
bal_health_init_pending(struct bal_health *h, uint32_t rise, uint32_t fall)
{
    bal_health_init(h, rise, fall);
    h->state = BAL_HEALTH_PENDING;
}

bool
bal_health_is_up(const struct bal_health *h)
{
    return h->state == BAL_HEALTH_STARTING || h->state == BAL_HEALTH_UP;
}

enum bal_health_change
bal_health_apply(struct bal_health *h, bool passed, uint64_t probe_started_ms)
{
    enum bal_health_change change = BAL_HEALTH_UNCHANGED;

    /* A streak starts with the first probe that disagrees with the one
     * before: its start time is when detection began. */
    if (passed) {
        if (h->consecutive_successes == 0)
            h->streak_started_ms = probe_started_ms;
        h->consecutive_successes++;
        h->consecutive_failures = 0;
    } else {
        if (h->consecutive_failures == 0)
            h->streak_started_ms = probe_started_ms;
        h->consecutive_failures++;
        h->consecutive_successes = 0;
    }

    switch (h->state) {
    case BAL_HEALTH_STARTING:
        h->state = passed ? BAL_HEALTH_UP : BAL_HEALTH_DOWN;
        change = passed ? BAL_HEALTH_UNCHANGED : BAL_HEALTH_WENT_DOWN;
        break;
    case BAL_HEALTH_UP:
        if (!passed && h->consecutive_failures >= h->fall) {
            h->state = BAL_HEALTH_DOWN;
            change = BAL_HEALTH_WENT_DOWN;
        }
        break;
    case BAL_HEALTH_PENDING:
        h->state = passed ? BAL_HEALTH_UP : BAL_HEALTH_DOWN;
        change = passed ? BAL_HEALTH_WENT_UP : BAL_HEALTH_UNCHANGED;
        break;
    case BAL_HEALTH_DOWN:
        if (passed && h->consecutive_successes >= h->rise) {
            h->state = BAL_HEALTH_UP;
            change = BAL_HEALTH_WENT_UP;
        }
        break;
    }
    return change;
}
