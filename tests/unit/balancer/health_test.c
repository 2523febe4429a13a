/* Tests balancer/health.c: rise and fall counts, the first probe, flapping,
 * the warning state. Results are written '+' pass, '-' fail, 'w' warn. */
#include "bal.h"
#include "check.h"

static enum bal_health_change
feed(struct bal_health *h, const char *results, uint64_t *t)
{
    enum bal_health_change last = BAL_HEALTH_UNCHANGED;

    for (const char *p = results; *p; p++) {
        enum bal_result r = *p == '+' ? BAL_RESULT_PASS
                          : *p == 'w' ? BAL_RESULT_WARN : BAL_RESULT_FAIL;
        enum bal_health_change c = bal_health_apply(h, r, (*t)++);
        if (c != BAL_HEALTH_UNCHANGED)
            last = c;
    }
    return last;
}

static void
test_first_probe(void)
{
    struct bal_health h;
    uint64_t t = 0;

    bal_health_init(&h, 2, 3);
    CHECK(bal_health_is_up(&h));                      /* starting serves */
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_WENT_DOWN);
    CHECK(!bal_health_is_up(&h));

    bal_health_init(&h, 2, 3);
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);
}

static void
test_exact_fall(void)
{
    struct bal_health h;
    uint64_t t = 0;

    bal_health_init(&h, 2, 3);
    feed(&h, "+", &t);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_UNCHANGED);
    CHECK(bal_health_is_up(&h));
    CHECK_EQ_INT(h.consecutive_failures, 2);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_WENT_DOWN);
    CHECK(!bal_health_is_up(&h));
    CHECK_EQ_INT(h.consecutive_failures, 3);
    CHECK_EQ_INT(h.consecutive_successes, 0);
    /* the streak began with the first failure, at t = 1 */
    CHECK_EQ_INT(h.streak_started_ms, 1);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_UNCHANGED);
}

static void
test_exact_rise(void)
{
    struct bal_health h;
    uint64_t t = 0;

    bal_health_init(&h, 3, 1);
    feed(&h, "-", &t);
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_UNCHANGED);
    CHECK(!bal_health_is_up(&h));
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_WENT_UP);
    CHECK(bal_health_is_up(&h));
    CHECK_EQ_INT(h.consecutive_successes, 3);
    CHECK_EQ_INT(h.streak_started_ms, 1);
}

static void
test_flapping(void)
{
    struct bal_health h;
    uint64_t t = 0;

    /* Alternating results never reach fall = 2 or rise = 2. */
    bal_health_init(&h, 2, 2);
    CHECK_EQ_INT(feed(&h, "+-+-+-+-+-+-", &t), BAL_HEALTH_UNCHANGED);
    CHECK(bal_health_is_up(&h));

    feed(&h, "--", &t);
    CHECK(!bal_health_is_up(&h));
    CHECK_EQ_INT(feed(&h, "+-+-+-+-+-", &t), BAL_HEALTH_UNCHANGED);
    CHECK(!bal_health_is_up(&h));

    /* rise = fall = 1 follows every result. */
    bal_health_init(&h, 1, 1);
    feed(&h, "+", &t);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_WENT_DOWN);
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_WENT_UP);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_WENT_DOWN);
}

static void
test_pending(void)
{
    struct bal_health h;
    uint64_t t = 0;

    /* added by a reload: out until the first pass, whatever rise says */
    bal_health_init_pending(&h, 3, 2);
    CHECK(!bal_health_is_up(&h));
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_WENT_UP);
    CHECK(bal_health_is_up(&h));

    /* a first failure leaves it down, with no change to report */
    bal_health_init_pending(&h, 3, 2);
    CHECK_EQ_INT(bal_health_apply(&h, false, t++), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_DOWN);
    CHECK(!bal_health_is_up(&h));
    /* and from there it needs rise passes like any down server */
    CHECK_EQ_INT(feed(&h, "++", &t), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(bal_health_apply(&h, true, t++), BAL_HEALTH_WENT_UP);
    CHECK_EQ_STR(bal_health_state_name(BAL_HEALTH_PENDING), "pending");
}

static void
test_names(void)
{
    CHECK_EQ_STR(bal_health_state_name(BAL_HEALTH_STARTING), "starting");
    CHECK_EQ_STR(bal_health_state_name(BAL_HEALTH_UP), "up");
    CHECK_EQ_STR(bal_health_state_name(BAL_HEALTH_DOWN), "down");
}

/* A warning answer is a pass for fall and not yet up for rise (rise 2,
 * fall 3 here). */
static void
test_warning(void)
{
    struct bal_health h;
    uint64_t t = 1;

    /* the first answer decides */
    bal_health_init(&h, 2, 3);
    CHECK_EQ_INT(feed(&h, "w", &t), BAL_HEALTH_WARNED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_WARNING);
    CHECK(bal_health_is_up(&h));
    bal_health_init_pending(&h, 2, 3);
    CHECK_EQ_INT(feed(&h, "w", &t), BAL_HEALTH_WENT_UP);
    CHECK_EQ_INT(h.state, BAL_HEALTH_WARNING);

    /* up -> warning at once; back up after rise passes, not before */
    bal_health_init(&h, 2, 3);
    CHECK_EQ_INT(feed(&h, "+", &t), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(feed(&h, "w", &t), BAL_HEALTH_WARNED);
    CHECK_EQ_INT(feed(&h, "+w+", &t), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_WARNING);
    CHECK_EQ_INT(feed(&h, "+", &t), BAL_HEALTH_CLEARED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);

    /* a warning restarts the failure streak: alive */
    CHECK_EQ_INT(feed(&h, "--w--", &t), BAL_HEALTH_WARNED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_WARNING);
    CHECK_EQ_INT(feed(&h, "-", &t), BAL_HEALTH_WENT_DOWN);      /* the 3rd fail */
    CHECK_EQ_INT(h.state, BAL_HEALTH_DOWN);
    CHECK_EQ_INT(h.streak_started_ms, t - 3);

    /* down -> after rise answers that are alive: up if they were passes,
     * else warning */
    CHECK_EQ_INT(feed(&h, "w", &t), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(feed(&h, "+", &t), BAL_HEALTH_WENT_UP);
    CHECK_EQ_INT(h.state, BAL_HEALTH_WARNING);
    CHECK_EQ_INT(h.streak_started_ms, t - 2);
    CHECK_EQ_INT(feed(&h, "---", &t), BAL_HEALTH_WENT_DOWN);
    CHECK_EQ_INT(feed(&h, "++", &t), BAL_HEALTH_WENT_UP);
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);
    CHECK_EQ_STR(bal_health_state_name(BAL_HEALTH_WARNING), "warning");
}

/* A saved health (state file, hand-over) is a starting point: the probes
 * of this process carry on from it through bal_health_apply. rise 3,
 * fall 2 here. */
static void
test_restore(void)
{
    struct bal_health h, before;
    uint64_t t = 1000;
    static const struct { enum bal_health_state state; uint32_t successes, failures; } bad[] = {
        { BAL_HEALTH_STARTING, 0, 0 },     /* not a probe's verdict */
        { BAL_HEALTH_PENDING, 0, 0 },
        { (enum bal_health_state)(BAL_HEALTH_WARNING + 1), 0, 0 },
        { (enum bal_health_state)99, 1, 0 },
        { BAL_HEALTH_UP, 1, 1 },           /* no run of probes leaves both */
        { BAL_HEALTH_DOWN, 2, 3 },
    };

    /* up, one failure into its streak (begun at 500): the next failure is
     * the fall, detected from the streak's start */
    bal_health_init(&h, 3, 2);
    CHECK(bal_health_restore(&h, BAL_HEALTH_UP, 0, 1, 500));
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);
    CHECK(bal_health_is_up(&h));
    CHECK_EQ_INT(h.rise, 3);
    CHECK_EQ_INT(h.fall, 2);
    CHECK_EQ_INT(h.consecutive_failures, 1);
    CHECK_EQ_INT(feed(&h, "-", &t), BAL_HEALTH_WENT_DOWN);
    CHECK_EQ_INT(h.streak_started_ms, 500);

    /* up: its first probe is no first verdict (STARTING's first failure
     * takes a server down at once; this one takes fall) */
    bal_health_init(&h, 3, 2);
    CHECK(bal_health_restore(&h, BAL_HEALTH_UP, 4, 0, 700));
    CHECK_EQ_INT(feed(&h, "-", &t), BAL_HEALTH_UNCHANGED);
    CHECK(bal_health_is_up(&h));
    CHECK_EQ_INT(h.streak_started_ms, t - 1);
    CHECK_EQ_INT(feed(&h, "-", &t), BAL_HEALTH_WENT_DOWN);

    /* down with two passes saved: out until rise (3) passes of its own,
     * the streak starting with the first of them */
    bal_health_init(&h, 3, 2);
    CHECK(bal_health_restore(&h, BAL_HEALTH_DOWN, 2, 0, 800));
    CHECK(!bal_health_is_up(&h));
    CHECK_EQ_INT(h.consecutive_successes, 2);
    CHECK_EQ_INT(h.consecutive_alive, 0);
    CHECK_EQ_INT(feed(&h, "++", &t), BAL_HEALTH_UNCHANGED);
    CHECK(!bal_health_is_up(&h));
    CHECK_EQ_INT(feed(&h, "+", &t), BAL_HEALTH_WENT_UP);
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);
    CHECK_EQ_INT(h.streak_started_ms, t - 3);

    /* down and failing: stays down, no change to report */
    bal_health_init(&h, 3, 2);
    CHECK(bal_health_restore(&h, BAL_HEALTH_DOWN, 0, 5, 900));
    CHECK_EQ_INT(feed(&h, "-", &t), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(h.consecutive_failures, 6);
    CHECK_EQ_INT(h.streak_started_ms, 900);

    /* warning with one pass: rise (3) passes clear it, so two more */
    bal_health_init(&h, 3, 2);
    CHECK(bal_health_restore(&h, BAL_HEALTH_WARNING, 1, 0, 950));
    CHECK(bal_health_is_up(&h));
    CHECK_EQ_INT(feed(&h, "+", &t), BAL_HEALTH_UNCHANGED);
    CHECK_EQ_INT(feed(&h, "+", &t), BAL_HEALTH_CLEARED);
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);

    /* a pool without checks: up, no streak */
    bal_health_init(&h, 3, 2);
    CHECK(bal_health_restore(&h, BAL_HEALTH_UP, 0, 0, 0));
    CHECK_EQ_INT(h.state, BAL_HEALTH_UP);

    /* what no probe can have left is refused, h untouched */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bal_health_init(&h, 3, 2);
        feed(&h, "+-", &t);
        before = h;
        CHECK(!bal_health_restore(&h, bad[i].state, bad[i].successes, bad[i].failures, 1));
        CHECK(h.state == before.state && h.rise == before.rise && h.fall == before.fall &&
              h.consecutive_successes == before.consecutive_successes &&
              h.consecutive_failures == before.consecutive_failures &&
              h.consecutive_alive == before.consecutive_alive &&
              h.streak_started_ms == before.streak_started_ms);
    }
}

int
main(void)
{
    test_warning();
    test_restore();
    test_first_probe();
    test_exact_fall();
    test_exact_rise();
    test_flapping();
    test_pending();
    test_names();
    return CHECK_DONE();
}
