/* Tests balancer/saved.c: the state file's header and server lines, their
 * round trip, and the lines refused. */
#include <string.h>

#include "bal.h"
#include "check.h"

static void
test_round_trip(void)
{
    struct bal_saved s = { .pool = "web", .name = "web1", .addr = "[::1]:8080",
                           .health = BAL_HEALTH_DOWN, .successes = 0, .failures = 3,
                           .admin = BAL_ADMIN_DRAIN, .down_ms = 4200 }, back;
    char line[512], err[128];
    size_t n = bal_saved_format(line, sizeof(line), &s);
    double t = 0;

    CHECK_EQ_STR(line, "server web web1 [::1]:8080 health=down successes=0 failures=3 "
                       "admin=drain down_ms=4200\n");
    CHECK_EQ_INT(n, strlen(line));
    line[n - 1] = '\0';
    CHECK_EQ_INT(bal_saved_parse(line, &back, err, sizeof(err)), 0);
    CHECK(memcmp(&s, &back, sizeof(s)) == 0);
    CHECK_EQ_INT(bal_saved_format(line, 40, &s), 0);        /* does not fit */
    n = bal_saved_format_header(line, sizeof(line), 1796150000.125);
    CHECK_EQ_STR(line, "lb-state 1 1796150000.125\n");
    line[n - 1] = '\0';
    CHECK_EQ_INT(bal_saved_header(line, &t), 0);
    CHECK(t > 1796150000.12 && t < 1796150000.13);
}

/* Every state a file holds, spelled as /stats spells it; one it does not
 * hold (starting, pending), or a name no config has, is not written. */
static void
test_each_state(void)
{
    static const enum bal_health_state healths[] = { BAL_HEALTH_UP, BAL_HEALTH_DOWN,
                                                     BAL_HEALTH_WARNING };
    static const enum bal_admin admins[] = { BAL_ADMIN_NONE, BAL_ADMIN_DRAIN,
                                             BAL_ADMIN_DISABLE };
    struct bal_saved s = { .pool = "p", .name = "n", .addr = "a:1" }, back;
    char line[512], want[512], err[128];

    for (size_t h = 0; h < 3; h++) {
        for (size_t a = 0; a < 3; a++) {
            size_t n;

            s.health = healths[h];
            s.admin = admins[a];
            n = bal_saved_format(line, sizeof(line), &s);
            snprintf(want, sizeof(want), "server p n a:1 health=%s successes=0 failures=0 "
                     "admin=%s down_ms=0\n", bal_health_state_name(s.health),
                     bal_admin_name(s.admin));
            CHECK_EQ_STR(line, want);
            line[n - 1] = '\0';
            CHECK_EQ_INT(bal_saved_parse(line, &back, err, sizeof(err)), 0);
            CHECK(back.health == s.health && back.admin == s.admin);
        }
    }
    s.health = BAL_HEALTH_STARTING;
    CHECK_EQ_INT(bal_saved_format(line, sizeof(line), &s), 0);
    s.health = BAL_HEALTH_PENDING;
    CHECK_EQ_INT(bal_saved_format(line, sizeof(line), &s), 0);
    s.health = BAL_HEALTH_UP;
    strcpy(s.name, "n 2");
    CHECK_EQ_INT(bal_saved_format(line, sizeof(line), &s), 0);
}

static void
test_refused(void)
{
    static const struct { const char *line, *err; } bad[] = {
        { "", "not a server line" },
        { "servers web a 1:1 health=up successes=0 failures=0 admin=none down_ms=0",
          "not a server line" },
        { "server web a", "address missing" },
        { "server  web a 1:1 health=up successes=0 failures=0 admin=none down_ms=0",
          "pool must be 1 to 63 bytes, without blanks" },
        { "server web a\t 1:1 health=up successes=0 failures=0 admin=none down_ms=0",
          "name must be 1 to 63 bytes, without blanks" },
        { "server web a 1:1 health=starting successes=0 failures=0 admin=none down_ms=0",
          "health= must be up, down or warning" },
        { "server web a 1:1 state=up successes=0 failures=0 admin=none down_ms=0",
          "expected health=" },
        { "server web a 1:1 health=up successes=-1 failures=0 admin=none down_ms=0",
          "successes= must be a number from 0 to 4294967295" },
        { "server web a 1:1 health=up successes=4294967296 failures=0 admin=none down_ms=0",
          "successes= must be a number from 0 to 4294967295" },
        { "server web a 1:1 health=up successes=1 failures=2x admin=none down_ms=0",
          "failures= must be a number from 0 to 4294967295" },
        { "server web a 1:1 health=up successes=01 failures=2 admin=none down_ms=0",
          "successes= must be a number from 0 to 4294967295" },
        { "server web a 1:1 health=up failures=2 successes=1 admin=none down_ms=0",
          "expected successes=" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none "
          "down_ms=18446744073709551616",
          "down_ms= must be a number from 0 to 18446744073709551615" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=off down_ms=0",
          "admin= must be none, drain or disable" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none down_ms=0 extra",
          "unexpected text after down_ms=" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none down_ms=0 ",
          "unexpected text after down_ms=" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none",
          "down_ms= missing" },
    };
    struct bal_saved s;
    char err[128], head[64];
    double t;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(bal_saved_parse(bad[i].line, &s, err, sizeof(err)), -1);
        CHECK_EQ_STR(err, bad[i].err);
    }
    /* a name longer than any the config allows */
    {
        char line[256];

        memset(line, 'x', sizeof(line));
        memcpy(line, "server web ", 11);
        line[sizeof(line) - 1] = '\0';
        CHECK_EQ_INT(bal_saved_parse(line, &s, err, sizeof(err)), -1);
    }
    CHECK_EQ_INT(bal_saved_header("lb-state 2 17", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 -5", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 17x", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 ", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 17.1234", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 17.", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 1e9", &t), -1);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 17", &t), 0);
    CHECK(t == 17);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 17.5", &t), 0);
    CHECK(t == 17.5);
    /* the bound: the year 5138 */
    CHECK_EQ_INT(bal_saved_header("lb-state 1 100000000000.000", &t), 0);
    CHECK(t == 1e11);
    CHECK_EQ_INT(bal_saved_header("lb-state 1 100000000000.001", &t), -1);
    CHECK_EQ_INT(bal_saved_format_header(head, sizeof(head), 1e11), 28);
    CHECK_EQ_INT(bal_saved_format_header(head, sizeof(head), 1e11 + 0.001), 0);
    CHECK_EQ_INT(bal_saved_format_header(head, sizeof(head), 1e300), 0);
    CHECK_EQ_INT(bal_saved_format_header(head, sizeof(head), -1), 17);
    CHECK_EQ_STR(head, "lb-state 1 0.000\n");
}

int
main(void)
{
    test_round_trip();
    test_each_state();
    test_refused();
    return CHECK_DONE();
}
