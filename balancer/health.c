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
 *
 * WARNING (an answer in check_warn: alive, but overloaded) is in rotation
 * at a reduced weight. A warning answer counts as a pass for fall (it
 * restarts the failure streak: the server is alive) and as not yet up for
 * rise (it restarts the streak of passes):
 *   UP      --warn-->             WARNING   (at once: it stays in rotation,
 *                                            only lighter, so one answer
 *                                            cannot flap it out)
 *   WARNING --pass x rise-->      UP
 *   UP, WARNING --fail x fall-->  DOWN
 *   DOWN    --(pass or warn) x rise--> UP if the last rise were passes,
 *                                      else WARNING
 *   STARTING, PENDING: the first answer decides (warn: WARNING).
 *
 * bal_health_restore puts a server, before its first probe, in the state
 * it had elsewhere (a state file, the process it took over from): a
 * starting point, not a transition; probes then move it as above.
 */
#include "bal.h"
#include "lb_enum.h"

static const char *const bal_health_state_names[] = {
    [BAL_HEALTH_STARTING] = "starting",
    [BAL_HEALTH_UP] = "up",
    [BAL_HEALTH_DOWN] = "down",
    [BAL_HEALTH_PENDING] = "pending",
    [BAL_HEALTH_WARNING] = "warning",
};

void
bal_health_init(struct bal_health *h, uint32_t rise, uint32_t fall)
{
    *h = (struct bal_health){ .state = BAL_HEALTH_STARTING,
                              .rise = rise ? rise : 1,
                              .fall = fall ? fall : 1 };
}

LB_ENUM_NAME(bal_health_state_name, enum bal_health_state, bal_health_state_names, "unknown")

void
bal_health_init_pending(struct bal_health *h, uint32_t rise, uint32_t fall)
{
    bal_health_init(h, rise, fall);
    h->state = BAL_HEALTH_PENDING;
}

bool
bal_health_restore(struct bal_health *h, enum bal_health_state state, uint32_t successes,
                   uint32_t failures, uint64_t streak_started_ms)
{
    if ((state != BAL_HEALTH_UP && state != BAL_HEALTH_DOWN && state != BAL_HEALTH_WARNING) ||
        (successes > 0 && failures > 0))
        return false;
    h->state = state;
    h->consecutive_successes = successes;
    h->consecutive_failures = failures;
    /* Warnings are not kept, only passes: what was alive is at least
     * that. A down server's count of alive probes starts over, so that it
     * stays out until rise probes of this process are alive. */
    h->consecutive_alive = state == BAL_HEALTH_DOWN ? 0 : successes;
    h->streak_started_ms = streak_started_ms;
    return true;
}

bool
bal_health_is_up(const struct bal_health *h)
{
    return h->state == BAL_HEALTH_STARTING || h->state == BAL_HEALTH_UP ||
           h->state == BAL_HEALTH_WARNING;
}

enum bal_health_change
bal_health_apply(struct bal_health *h, enum bal_result r, uint64_t probe_started_ms)
{
    bool passed = r == BAL_RESULT_PASS, alive = r != BAL_RESULT_FAIL;

    /* A streak starts with the first probe that disagrees with the one
     * before, alive (pass or warn) or not: its start time is when
     * detection began. */
    if (alive ? h->consecutive_alive == 0 : h->consecutive_failures == 0)
        h->streak_started_ms = probe_started_ms;
    h->consecutive_successes = passed ? h->consecutive_successes + 1 : 0;
    h->consecutive_failures = alive ? 0 : h->consecutive_failures + 1;
    h->consecutive_alive = alive ? h->consecutive_alive + 1 : 0;

    switch (h->state) {
    case BAL_HEALTH_STARTING:
        h->state = passed ? BAL_HEALTH_UP : alive ? BAL_HEALTH_WARNING : BAL_HEALTH_DOWN;
        return !alive ? BAL_HEALTH_WENT_DOWN : passed ? BAL_HEALTH_UNCHANGED : BAL_HEALTH_WARNED;
    case BAL_HEALTH_PENDING:
        h->state = passed ? BAL_HEALTH_UP : alive ? BAL_HEALTH_WARNING : BAL_HEALTH_DOWN;
        return alive ? BAL_HEALTH_WENT_UP : BAL_HEALTH_UNCHANGED;
    case BAL_HEALTH_UP:
    case BAL_HEALTH_WARNING:
        if (!alive && h->consecutive_failures >= h->fall) {
            h->state = BAL_HEALTH_DOWN;
            return BAL_HEALTH_WENT_DOWN;
        }
        if (h->state == BAL_HEALTH_UP && r == BAL_RESULT_WARN) {
            h->state = BAL_HEALTH_WARNING;
            return BAL_HEALTH_WARNED;
        }
        if (h->state == BAL_HEALTH_WARNING && h->consecutive_successes >= h->rise) {
            h->state = BAL_HEALTH_UP;
            return BAL_HEALTH_CLEARED;
        }
        return BAL_HEALTH_UNCHANGED;
    case BAL_HEALTH_DOWN:
        if (alive && h->consecutive_alive >= h->rise) {
            h->state = h->consecutive_successes >= h->rise ? BAL_HEALTH_UP : BAL_HEALTH_WARNING;
            return BAL_HEALTH_WENT_UP;
        }
        return BAL_HEALTH_UNCHANGED;
    }
    return BAL_HEALTH_UNCHANGED;
}
