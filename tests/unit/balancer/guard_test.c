/* Tests balancer/guard.c: the floor, who is held, no swapping, release. */
#include "bal.h"
#include "check.h"

static size_t
count_in(const struct bal_guard_server *s, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += s[i].in_rotation;
    return k;
}

/* The next call sees this call's guard decisions. */
static void
carry(struct bal_guard_server *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i].was_guarded = s[i].guarded;
}

static void
test_floor(void)
{
    CHECK_EQ_INT(bal_guard_floor(50, true, 4), 2);
    CHECK_EQ_INT(bal_guard_floor(50, true, 3), 2);      /* rounded up */
    CHECK_EQ_INT(bal_guard_floor(1, true, 10), 1);
    CHECK_EQ_INT(bal_guard_floor(0, true, 10), 0);
    CHECK_EQ_INT(bal_guard_floor(100, true, 7), 7);
    CHECK_EQ_INT(bal_guard_floor(3, false, 4), 3);
    CHECK_EQ_INT(bal_guard_floor(9, false, 4), 4);      /* never above n */
    CHECK_EQ_INT(bal_guard_floor(1, false, 0), 0);
}

static void
test_crash_three_of_four(void)
{
    struct bal_guard_server s[4] = {
        { .is_healthy = true }, { .is_healthy = true },
        { .is_healthy = true }, { .is_healthy = true },
    };
    uint32_t floor = bal_guard_floor(50, true, 4);

    /* servers 0, 1, 2 fail in that order */
    for (int i = 0; i < 3; i++) {
        s[i].is_healthy = false;
        s[i].down_since_ms = 100 + (uint64_t)i;
        bal_guard_apply(s, 4, floor);
        carry(s, 4);
    }
    CHECK_EQ_INT(count_in(s, 4), 2);
    CHECK(!s[0].in_rotation);
    CHECK(!s[1].in_rotation);
    CHECK(s[2].in_rotation && s[2].guarded);    /* failed last: held */
    CHECK(s[3].in_rotation && !s[3].guarded);

    /* a held server that passes once is still down: no swap */
    s[1].down_since_ms = 500;                   /* 1 failed again, later */
    bal_guard_apply(s, 4, floor);
    carry(s, 4);
    CHECK(s[2].guarded);
    CHECK(!s[1].in_rotation);

    /* server 0 recovers: the floor no longer needs server 2 */
    s[0].is_healthy = true;
    bal_guard_apply(s, 4, floor);
    carry(s, 4);
    CHECK(!s[2].in_rotation && !s[2].guarded);
    CHECK_EQ_INT(count_in(s, 4), 2);

    /* everyone recovers: all in, none guarded */
    for (int i = 0; i < 4; i++)
        s[i].is_healthy = true;
    bal_guard_apply(s, 4, floor);
    CHECK_EQ_INT(count_in(s, 4), 4);
    for (int i = 0; i < 4; i++)
        CHECK(!s[i].guarded);
}

static void
test_all_fail_at_once(void)
{
    struct bal_guard_server s[4];
    uint32_t floor = bal_guard_floor(3, false, 4);

    /* all four fail; 2 and 3 began failing last: they and 1 are held */
    for (int i = 0; i < 4; i++)
        s[i] = (struct bal_guard_server){ .down_since_ms = 10 * (uint64_t)i };
    bal_guard_apply(s, 4, floor);
    CHECK_EQ_INT(count_in(s, 4), 3);
    CHECK(!s[0].in_rotation);
    CHECK(s[1].guarded && s[2].guarded && s[3].guarded);
}

static void
test_operator_counts_but_is_not_held(void)
{
    struct bal_guard_server s[4] = {
        { .is_healthy = true, .is_admin_out = true },
        { .is_healthy = true },
        { .is_healthy = false, .down_since_ms = 5 },
        { .is_healthy = false, .down_since_ms = 6, .is_admin_out = true },
    };

    bal_guard_apply(s, 4, 2);
    CHECK(!s[0].in_rotation && !s[0].guarded);   /* the operator wins */
    CHECK(!s[3].in_rotation && !s[3].guarded);
    CHECK(s[1].in_rotation);
    CHECK(s[2].in_rotation && s[2].guarded);     /* held to reach 2 */
    CHECK_EQ_INT(count_in(s, 4), 2);
}

static void
test_floor_zero_and_empty(void)
{
    struct bal_guard_server s[2] = { { .down_since_ms = 1 }, { .down_since_ms = 2 } };

    bal_guard_apply(s, 2, 0);
    CHECK_EQ_INT(count_in(s, 2), 0);
    bal_guard_apply(s, 0, 1);                   /* no servers: no crash */
}

int
main(void)
{
    test_floor();
    test_crash_three_of_four();
    test_all_fail_at_once();
    test_operator_counts_but_is_not_held();
    test_floor_zero_and_empty();
    return CHECK_DONE();
}
