/* Tests include/lb_enum.h: LB_ENUM_NAME on the shapes of table the tree
 * has (in order, designated with a gap, NULL-terminated for the config
 * parser), out-of-range and negative values; then every name function that
 * uses it, value by value, since its strings are in /stats, /metrics and
 * the logs and must not change. */
#include <stddef.h>

#include "bal.h"
#include "check.h"
#include "conf.h"
#include "lb_enum.h"

enum colour { RED = 0, GREEN, BLUE, VIOLET };

static const char *const in_order[] = { "red", "green", "blue" };
static const char *const with_gap[] = { [RED] = "red", [BLUE] = "blue" };
static const char *const ended[] = { "red", "green", NULL };

static const char *in_order_name(enum colour c);
static const char *with_gap_name(enum colour c);
static const char *ended_name(int c);

static LB_ENUM_NAME(in_order_name, enum colour, in_order, "?")
static LB_ENUM_NAME(with_gap_name, enum colour, with_gap, "?")
static LB_ENUM_NAME(ended_name, int, ended, "?")

/* fn(0), fn(1), ... are the strings given, the last one past the end. */
#define CHECK_NAMES(fn, type, ...)                                          \
    do {                                                                    \
        static const char *const want_[] = { __VA_ARGS__ };                 \
        for (size_t i_ = 0; i_ < sizeof(want_) / sizeof(want_[0]); i_++)    \
            CHECK_EQ_STR(fn((type)i_), want_[i_]);                          \
    } while (0)

static void
test_macro(void)
{
    CHECK_NAMES(in_order_name, enum colour, "red", "green", "blue", "?");
    CHECK_EQ_STR(in_order_name((enum colour)1000), "?");
    /* a gap of designated initializers is the fallback, not NULL */
    CHECK_NAMES(with_gap_name, enum colour, "red", "?", "blue", "?");
    /* the parser's NULL end is past the names; so is a negative value */
    CHECK_NAMES(ended_name, int, "red", "green", "?", "?");
    CHECK_EQ_STR(ended_name(-1), "?");
}

static void
test_modules(void)
{
    CHECK_NAMES(bal_state_name, enum bal_state, "up", "draining", "down", "disabled", "unknown");
    CHECK_EQ_STR(bal_state_name((enum bal_state)-1), "unknown");
    CHECK_NAMES(bal_admin_name, enum bal_admin, "none", "drain", "disable", "unknown");
    CHECK_NAMES(bal_beat_name, enum bal_beat, "off", "pass", "warn", "fail", "unknown");
    CHECK_NAMES(bal_health_state_name, enum bal_health_state, "starting", "up", "down",
                "pending", "warning", "unknown");
    CHECK_NAMES(conf_balance_name, enum conf_balance, "roundrobin", "leastconn", "source",
                "random", "unknown");
    CHECK_NAMES(conf_log_level_name, enum conf_log_level, "debug", "info", "warn", "error",
                "unknown");
    CHECK_NAMES(conf_check_name, enum conf_check, "none", "tcp", "http", "https", "mysql",
                "pgsql", "redis", "dns", "udp", "grpc", "unknown");
    CHECK_NAMES(conf_role_name, enum conf_role, "any", "primary", "replica", "unknown");
    CHECK_NAMES(conf_source_name, enum conf_source, "config", "dns", "api", "etcd", "unknown");
}

int
main(void)
{
    test_macro();
    test_modules();
    return CHECK_DONE();
}
