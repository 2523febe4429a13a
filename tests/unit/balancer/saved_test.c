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

static void
test_refused(void)
{
    static const struct { const char *line, *err; } bad[] = {
        { "", "not a server line" },
        { "servers web a 1:1 health=up successes=0 failures=0 admin=none down_ms=0",
          "expected: server POOL NAME ADDRESS ..." },
        { "server web a", "expected: server POOL NAME ADDRESS ..." },
        { "server  web a 1:1 health=up successes=0 failures=0 admin=none down_ms=0",
          "expected: server POOL NAME ADDRESS ..." },
        { "server web a 1:1 health=starting successes=0 failures=0 admin=none down_ms=0",
          "health= must be up, down or warning" },
        { "server web a 1:1 state=up successes=0 failures=0 admin=none down_ms=0",
          "expected health=" },
        { "server web a 1:1 health=up successes=-1 failures=0 admin=none down_ms=0",
          "expected successes=N" },
        { "server web a 1:1 health=up successes=4294967296 failures=0 admin=none down_ms=0",
          "expected successes=N" },
        { "server web a 1:1 health=up successes=1 failures=2x admin=none down_ms=0",
          "expected failures=N" },
        { "server web a 1:1 health=up successes=01 failures=2 admin=none down_ms=0",
          "expected successes=N" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none "
          "down_ms=18446744073709551616", "expected down_ms=N at the end" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=off down_ms=0",
          "admin= must be none, drain or disable" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none down_ms=0 extra",
          "expected down_ms=N at the end" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none down_ms=0 ",
          "expected down_ms=N at the end" },
        { "server web a 1:1 health=up successes=1 failures=2 admin=none",
          "expected down_ms=N at the end" },
    };
    struct bal_saved s;
    char err[128];
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
    CHECK_EQ_INT(bal_saved_header("lb-state 1 17", &t), 0);
}

int
main(void)
{
    test_round_trip();
    test_refused();
    return CHECK_DONE();
}
