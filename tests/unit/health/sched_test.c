/* Tests hc_sched_next (health/hc_pool.c): the spread of the second probe,
 * the fixed-rate plan, skipped slots, tiny intervals. */
#include <stdint.h>

#include "check.h"
#include "hc.h"

/* A fixed sequence of test inputs (splitmix64). */
static uint64_t
next_random(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The plan from the contract: the first slot of phase `first` (first,
 * first + interval, ...) strictly after now, by walking the slots. */
static uint64_t
first_slot_after(uint64_t first, uint64_t now, uint64_t interval)
{
    uint64_t slot = first;

    while (slot <= now)
        slot += interval;
    return slot;
}

/* seq 0 or 1 (the first probe started at once): the next comes at a
 * random point of the first interval, planned + 1 .. planned + interval,
 * and rnd covers it evenly. */
static void
test_first_spread(void)
{
    static const uint64_t intervals[] = { 2, 3, 7, 1000, 2000 };

    for (size_t k = 0; k < sizeof(intervals) / sizeof(intervals[0]); k++) {
        uint64_t iv = intervals[k], planned = 50000;
        uint32_t hits[2001] = { 0 };

        for (uint64_t seq = 0; seq <= 1; seq++) {
            CHECK_EQ_INT(hc_sched_next(planned, planned, iv, seq, 0), planned + 1);
            CHECK_EQ_INT(hc_sched_next(planned, planned, iv, seq, iv - 1), planned + iv);
            CHECK_EQ_INT(hc_sched_next(planned, planned, iv, seq, iv), planned + 1);
            CHECK_EQ_INT(hc_sched_next(planned, planned, iv, seq, UINT64_MAX),
                         planned + 1 + UINT64_MAX % iv);
        }
        /* three rounds of rnd: every point of the interval three times */
        for (uint64_t rnd = 0; rnd < 3 * iv; rnd++) {
            uint64_t next = hc_sched_next(planned, planned, iv, 1, rnd);

            CHECK(next >= planned + 1 && next <= planned + iv);
            if (next >= planned + 1 && next <= planned + iv)
                hits[next - planned]++;
        }
        for (uint64_t d = 1; d <= iv; d++) {
            if (hits[d] != 3) {
                fprintf(stderr, "  interval %llu, offset %llu\n", (unsigned long long)iv,
                        (unsigned long long)d);
                CHECK_EQ_INT(hits[d], 3);
            }
        }
        /* the timer of the first slot fired late, within the spread: the
         * spread point still stands */
        CHECK_EQ_INT(hc_sched_next(planned, planned + 5, 1000 + iv, 1, 500), planned + 501);
    }
    /* random inputs: always within the first interval */
    uint64_t st = 42;
    for (int i = 0; i < 10000; i++) {
        uint64_t iv = 2 + next_random(&st) % 100000, planned = next_random(&st) % (UINT64_C(1) << 50);
        uint64_t next = hc_sched_next(planned, planned, iv, next_random(&st) % 2,
                                      next_random(&st));

        CHECK(next > planned && next <= planned + iv);
    }
}

/* The first slot itself fired so late that the spread point is already
 * past: the plan keeps the spread phase, first slot after now. */
static void
test_first_spread_late(void)
{
    /* spread point 1001; now 1700: 1501 is past too, 2001 is next */
    CHECK_EQ_INT(hc_sched_next(1000, 1700, 500, 1, 0), 2001);
    /* spread point 1300, now exactly on it: the next one of its phase */
    CHECK_EQ_INT(hc_sched_next(1000, 1300, 500, 1, 299), 1800);
    CHECK_EQ_INT(hc_sched_next(1000, 1299, 500, 1, 299), 1300);
}

/* After the spread the period is exact: planned + interval, not now +
 * interval, whenever the timer fired less than a period late (or early). */
static void
test_fixed_rate(void)
{
    static const uint64_t seqs[] = { 2, 3, 100, UINT64_MAX };

    for (size_t k = 0; k < sizeof(seqs) / sizeof(seqs[0]); k++) {
        uint64_t seq = seqs[k];

        CHECK_EQ_INT(hc_sched_next(1000, 1000, 500, seq, 0), 1500);    /* on time */
        CHECK_EQ_INT(hc_sched_next(1000, 1001, 500, seq, 0), 1500);    /* 1 late */
        CHECK_EQ_INT(hc_sched_next(1000, 1250, 500, seq, 12345), 1500);
        CHECK_EQ_INT(hc_sched_next(1000, 1499, 500, seq, 0), 1500);    /* just under */
        CHECK_EQ_INT(hc_sched_next(1000, 990, 500, seq, 0), 1500);     /* early */
        CHECK_EQ_INT(hc_sched_next(1000, 0, 500, seq, 0), 1500);
        /* rnd plays no part */
        CHECK_EQ_INT(hc_sched_next(1000, 1100, 500, seq, UINT64_MAX), 1500);
    }
    /* a run of slots, each timer 0..interval-1 late: no drift */
    uint64_t planned = 7, st = 7;
    for (uint64_t i = 1; i <= 1000; i++) {
        uint64_t now = planned + next_random(&st) % 2000;

        planned = hc_sched_next(planned, now, 2000, 1 + i, next_random(&st));
        CHECK_EQ_INT(planned, 7 + 2000 * i);
    }
}

/* Fell behind by a period or more: the slots already past are skipped, and
 * the plan is the first slot strictly after now on the original phase. */
static void
test_skipped_slots(void)
{
    CHECK_EQ_INT(hc_sched_next(1000, 1500, 500, 5, 0), 2000);  /* exactly one late */
    CHECK_EQ_INT(hc_sched_next(1000, 1501, 500, 5, 0), 2000);
    CHECK_EQ_INT(hc_sched_next(1000, 1999, 500, 5, 0), 2000);
    CHECK_EQ_INT(hc_sched_next(1000, 2000, 500, 5, 0), 2500);
    CHECK_EQ_INT(hc_sched_next(1000, 2700, 500, 5, 0), 3000);  /* 1500..2500 skipped */
    CHECK_EQ_INT(hc_sched_next(1000, 1000 + 500 * 1000 + 1, 500, 5, 0),
                 1000 + 500 * 1001);

    /* random inputs against walking the slots */
    uint64_t st = 1;
    for (int i = 0; i < 20000; i++) {
        uint64_t iv = 1 + next_random(&st) % 5000;
        uint64_t planned = next_random(&st) % (UINT64_C(1) << 40);
        uint64_t now = planned + next_random(&st) % (iv * 50);
        uint64_t seq = 2 + next_random(&st) % 1000;
        uint64_t next = hc_sched_next(planned, now, iv, seq, next_random(&st));

        if (next != first_slot_after(planned + iv, now, iv)) {
            fprintf(stderr, "  planned %llu now %llu interval %llu\n",
                    (unsigned long long)planned, (unsigned long long)now,
                    (unsigned long long)iv);
            CHECK_EQ_INT(next, first_slot_after(planned + iv, now, iv));
        }
    }
}

/* interval 1: no spread (there is no room), every millisecond. */
static void
test_interval_one(void)
{
    for (uint64_t seq = 0; seq <= 3; seq++) {
        CHECK_EQ_INT(hc_sched_next(10, 10, 1, seq, 0), 11);
        CHECK_EQ_INT(hc_sched_next(10, 10, 1, seq, 12345), 11);
        CHECK_EQ_INT(hc_sched_next(10, 5, 1, seq, 0), 11);
        CHECK_EQ_INT(hc_sched_next(10, 11, 1, seq, 0), 12);
        CHECK_EQ_INT(hc_sched_next(10, 20, 1, seq, 0), 21);
    }
}

/* interval 0 (never from a valid config): taken as 1, no division by zero,
 * no spread, and the plan still moves forward. */
static void
test_interval_zero(void)
{
    for (uint64_t seq = 0; seq <= 3; seq++) {
        CHECK_EQ_INT(hc_sched_next(10, 10, 0, seq, 0), 11);
        CHECK_EQ_INT(hc_sched_next(10, 10, 0, seq, UINT64_MAX), 11);
        CHECK_EQ_INT(hc_sched_next(10, 5, 0, seq, 7), 11);
        CHECK_EQ_INT(hc_sched_next(10, 20, 0, seq, 7), 21);
        CHECK_EQ_INT(hc_sched_next(0, 0, 0, seq, 7), 1);
    }
}

int
main(void)
{
    test_first_spread();
    test_first_spread_late();
    test_fixed_rate();
    test_skipped_slots();
    test_interval_one();
    test_interval_zero();
    return CHECK_DONE();
}
