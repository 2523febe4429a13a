/*
 * conf_value_test.c - the value parsers of conf/conf_value.c, one table of
 * good and bad inputs per parser, with the exact messages.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conf_value.h"

/* Leading zeros change no value, however many: 32 of them are more digits
 * than any 64-bit number has. */
#define Z32 "00000000000000000000000000000000"

struct duration_case {
    const char *in;
    int rc;
    uint64_t ms;
    const char *err;
};

static void
test_duration(void)
{
    static const struct duration_case cases[] = {
        { "0", 0, 0, NULL },
        { "0ms", 0, 0, NULL },
        { "0h", 0, 0, NULL },
        { "1ms", 0, 1, NULL },
        { "250ms", 0, 250, NULL },
        { "30s", 0, 30000, NULL },
        { "5m", 0, 300000, NULL },
        { "1h", 0, 3600000, NULL },
        { "007s", 0, 7000, NULL },
        { "10", -1, 0, "\"10\" needs a unit (ms, s, m or h)" },
        { "10q", -1, 0, "\"10q\" is not a duration (use ms, s, m or h)" },
        { "10S", -1, 0, "\"10S\" is not a duration (use ms, s, m or h)" },
        { "1 s", -1, 0, "\"1 s\" is not a duration (use ms, s, m or h)" },
        { " 1s", -1, 0, "\" 1s\" is not a duration (use ms, s, m or h)" },
        { "-1s", -1, 0, "\"-1s\" is not a duration (use ms, s, m or h)" },
        { "+1s", -1, 0, "\"+1s\" is not a duration (use ms, s, m or h)" },
        { "s", -1, 0, "\"s\" is not a duration (use ms, s, m or h)" },
        { "1.5s", -1, 0, "\"1.5s\" is not a duration (use ms, s, m or h)" },
        { "1m30s", -1, 0, "\"1m30s\" is not a duration (use ms, s, m or h)" },
        { "", -1, 0, "empty value (expected a duration such as 500ms, 30s, "
                     "5m or 1h)" },
        /* fits in 64 bits, overflows once multiplied by 3600000 */
        { "5124095576031h", -1, 0, "\"5124095576031h\" is too large" },
        { "5124095576030h", 0, UINT64_C(5124095576030) * 3600000, NULL },
        { "18446744073709551615ms", 0, UINT64_MAX, NULL },
        { "18446744073709551616ms", -1, 0,
          "\"18446744073709551616ms\" is too large" },
        { Z32 "5s", 0, 5000, NULL },
        { Z32 "0", 0, 0, NULL },
        { Z32 "18446744073709551615ms", 0, UINT64_MAX, NULL },
        { Z32 "18446744073709551616ms", -1, 0,
          "\"" Z32 "18446744073709551616ms\" is too large" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        uint64_t ms = 12345;
        int rc = conf_parse_duration(cases[i].in, &ms, err, sizeof(err));
        CHECK_EQ_INT(rc, cases[i].rc);
        if (cases[i].rc == 0) {
            CHECK_EQ_INT(ms, cases[i].ms);
        } else {
            CHECK_EQ_STR(err, cases[i].err);
            CHECK_EQ_INT(ms, 12345);        /* untouched on error */
        }
    }
}

static void
test_format_duration(void)
{
    char buf[32];

    conf_format_duration(0, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "0");
    conf_format_duration(1, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "1ms");
    conf_format_duration(1500, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "1500ms");
    conf_format_duration(30000, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "30s");
    conf_format_duration(90000, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "90s");
    conf_format_duration(300000, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "5m");
    conf_format_duration(86400000, buf, sizeof(buf));
    CHECK_EQ_STR(buf, "24h");
}

static void
test_uint(void)
{
    static const struct { const char *in; int rc; uint64_t v; const char *err; }
    cases[] = {
        { "0", 0, 0, NULL },
        { "10000", 0, 10000, NULL },
        { "0010", 0, 10, NULL },
        { "18446744073709551615", 0, UINT64_MAX, NULL },
        { "18446744073709551616", -1, 0,
          "\"18446744073709551616\" is too large" },
        { "", -1, 0, "empty value (expected a number)" },
        { "3abc", -1, 0, "\"3abc\" is not a number" },
        { "-1", -1, 0, "\"-1\" is not a number" },
        { "+1", -1, 0, "\"+1\" is not a number" },
        { " 1", -1, 0, "\" 1\" is not a number" },
        { "1 0", -1, 0, "\"1 0\" is not a number" },
        { "0x10", -1, 0, "\"0x10\" is not a number" },
        { Z32 "1", 0, 1, NULL },
        { Z32 Z32 "18446744073709551615", 0, UINT64_MAX, NULL },
        { Z32 "x", -1, 0, "\"" Z32 "x\" is not a number" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        uint64_t v = 77;
        CHECK_EQ_INT(conf_parse_uint(cases[i].in, &v, err, sizeof(err)),
                     cases[i].rc);
        if (cases[i].rc == 0)
            CHECK(v == cases[i].v);
        else
            CHECK_EQ_STR(err, cases[i].err);
    }
}

static void
test_bool(void)
{
    static const struct { const char *in; int rc; bool v; } cases[] = {
        { "on", 0, true }, { "off", 0, false }, { "yes", 0, true },
        { "no", 0, false }, { "true", 0, true }, { "false", 0, false },
        { "1", 0, true }, { "0", 0, false }, { "ON", 0, true },
        { "Off", 0, false }, { "maybe", -1, false }, { "", -1, false },
        { "2", -1, false }, { "onn", -1, false },
    };
    char err[256];
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool v = !cases[i].v;
        CHECK_EQ_INT(conf_parse_bool(cases[i].in, &v, err, sizeof(err)),
                     cases[i].rc);
        if (cases[i].rc == 0)
            CHECK_EQ_INT(v, cases[i].v);
    }
    conf_parse_bool("maybe", &(bool){false}, err, sizeof(err));
    CHECK_EQ_STR(err, "\"maybe\" is not on or off (use on/off, yes/no, "
                 "true/false or 1/0)");
}

static void
test_enum(void)
{
    static const char *const names[] = { "debug", "info", "warn", "error",
                                         NULL };
    char err[256];
    int v = -1;

    CHECK_EQ_INT(conf_parse_enum("debug", names, &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 0);
    CHECK_EQ_INT(conf_parse_enum("error", names, &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 3);
    CHECK_EQ_INT(conf_parse_enum("WARN", names, &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 2);
    CHECK_EQ_INT(conf_parse_enum("verbose", names, &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"verbose\" is not one of debug, info, warn or error");
    CHECK_EQ_INT(conf_parse_enum("", names, &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_enum("info ", names, &v, err, sizeof(err)), -1);
}

static void
test_count_or_percent(void)
{
    struct conf_count_or_percent v;
    char err[256];

    CHECK_EQ_INT(conf_parse_count_or_percent("3", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v.value, 3);
    CHECK(!v.is_percent);
    CHECK_EQ_INT(conf_parse_count_or_percent("50%", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v.value, 50);
    CHECK(v.is_percent);
    CHECK_EQ_INT(conf_parse_count_or_percent("0%", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v.value, 0);
    CHECK(v.is_percent);
    CHECK_EQ_INT(conf_parse_count_or_percent("100%", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v.value, 100);
    CHECK_EQ_INT(conf_parse_count_or_percent("101%", &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "101% is out of range (0%..100%)");
    CHECK_EQ_INT(conf_parse_count_or_percent("%", &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"%\" is not a count or a percentage (e.g. 2 or 50%)");
    CHECK_EQ_INT(conf_parse_count_or_percent("50 %", &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_count_or_percent("-5", &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_count_or_percent("5%%", &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_count_or_percent("4294967296", &v, err,
                                             sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"4294967296\" is too large");
    CHECK_EQ_INT(conf_parse_count_or_percent("", &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_count_or_percent(Z32 "50%", &v, err, sizeof(err)),
                 0);
    CHECK_EQ_INT(v.value, 50);
    CHECK(v.is_percent);
}

static void
test_expect(void)
{
    struct conf_expect e;
    char err[256];

    CHECK_EQ_INT(conf_parse_expect("200-399", &e, err, sizeof(err)), 0);
    CHECK_EQ_INT(e.nranges, 1);
    CHECK_EQ_INT(e.ranges[0].lo, 200);
    CHECK_EQ_INT(e.ranges[0].hi, 399);

    CHECK_EQ_INT(conf_parse_expect("200, 204 ,300-399", &e, err, sizeof(err)),
                 0);
    CHECK_EQ_INT(e.nranges, 3);
    CHECK_EQ_INT(e.ranges[0].lo, 200);
    CHECK_EQ_INT(e.ranges[0].hi, 200);
    CHECK_EQ_INT(e.ranges[1].lo, 204);
    CHECK_EQ_INT(e.ranges[1].hi, 204);
    CHECK_EQ_INT(e.ranges[2].lo, 300);
    CHECK_EQ_INT(e.ranges[2].hi, 399);

    CHECK_EQ_INT(conf_parse_expect("100-599", &e, err, sizeof(err)), 0);
    CHECK_EQ_INT(conf_parse_expect("204-204", &e, err, sizeof(err)), 0);
    CHECK_EQ_INT(conf_parse_expect(Z32 "200-" Z32 "399", &e, err, sizeof(err)),
                 0);
    CHECK_EQ_INT(e.nranges, 1);
    CHECK_EQ_INT(e.ranges[0].lo, 200);
    CHECK_EQ_INT(e.ranges[0].hi, 399);
    CHECK_EQ_INT(conf_parse_expect(Z32 "600", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "status code 600 is out of range (100..599)");

    /* an error leaves *out as it was */
    e.nranges = 9;
    CHECK_EQ_INT(conf_parse_expect("200,600", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "status code 600 is out of range (100..599)");
    CHECK_EQ_INT(e.nranges, 9);
    CHECK_EQ_INT(conf_parse_expect("99", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "status code 99 is out of range (100..599)");
    CHECK_EQ_INT(conf_parse_expect("200-600", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "status code 600 is out of range (100..599)");
    CHECK_EQ_INT(conf_parse_expect("399-200", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "range \"399-200\" is reversed (write the lower code "
                 "first)");
    CHECK_EQ_INT(conf_parse_expect("2xx", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"2xx\" is not a status code or range (e.g. 200 or "
                 "200-399)");
    CHECK_EQ_INT(conf_parse_expect("200 - 399", &e, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_expect("200-", &e, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_expect("-200", &e, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_expect("200-300-400", &e, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_expect("200,,300", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"200,,300\" has an empty item (expected status codes "
                 "or ranges, e.g. 200,204,300-399)");
    CHECK_EQ_INT(conf_parse_expect("200,", &e, err, sizeof(err)), -1);
    CHECK_EQ_INT(conf_parse_expect("", &e, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "empty value (expected status codes or ranges, e.g. "
                 "200,204,300-399)");

    /* CONF_EXPECT_MAX_RANGES (16) items fit, 17 do not */
    CHECK_EQ_INT(conf_parse_expect("200,201,202,203,204,205,206,207,208,209,"
                                   "210,211,212,213,214,215", &e, err,
                                   sizeof(err)), 0);
    CHECK_EQ_INT(e.nranges, 16);
    CHECK_EQ_INT(conf_parse_expect("200,201,202,203,204,205,206,207,208,209,"
                                   "210,211,212,213,214,215,216", &e, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "more than 16 codes or ranges");
}

static void
test_hosts(void)
{
    static const struct { const char *in; const char *err; } bad[] = {
        { "a,,b", "\"a,,b\" has an empty item (expected host names or IP "
                  "addresses, e.g. lb.example.com, 10.0.0.5)" },
        { "a,", "\"a,\" has an empty item (expected host names or IP "
                "addresses, e.g. lb.example.com, 10.0.0.5)" },
        { ",", "\",\" has an empty item (expected host names or IP "
               "addresses, e.g. lb.example.com, 10.0.0.5)" },
        { "lb.example.com:9900", "\"lb.example.com:9900\": write the name "
                                 "without a port (any port is accepted)" },
        { "*.example.com", "\"*.example.com\" is not a host name or IP address "
                           "(letters, digits, - _ and . ; IPv6 in brackets; no "
                           "wildcard)" },
        { "a b", "\"a b\" is not a host name or IP address (letters, digits, - _ "
                 "and . ; IPv6 in brackets; no wildcard)" },
        { "-lb", NULL }, { "lb-", NULL }, { "lb..x", NULL }, { ".lb", NULL },
        { "lb.", NULL }, { "[::1]:9900", NULL }, { "::1", NULL }, { "[::1", NULL },
        { "[]", NULL }, { "[lb]", NULL }, { "l\xc3\xa9", NULL },
        /* a 64-character label */
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.x", NULL },
        { "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16 hosts" },
    };
    struct conf_hosts h;
    char err[256];

    CHECK_EQ_INT(conf_parse_hosts("", &h, err, sizeof(err)), 0);
    CHECK_EQ_INT(h.n, 0);
    CHECK_EQ_INT(conf_parse_hosts("  ", &h, err, sizeof(err)), 0);
    CHECK_EQ_INT(h.n, 0);
    CHECK_EQ_INT(conf_parse_hosts(" LB.Example.com , admin_1.lan,10.0.0.5, [::1] ,x",
                                  &h, err, sizeof(err)), 0);
    CHECK_EQ_INT(h.n, 5);
    CHECK_EQ_STR(h.names[0], "lb.example.com");
    CHECK_EQ_STR(h.names[1], "admin_1.lan");
    CHECK_EQ_STR(h.names[2], "10.0.0.5");
    CHECK_EQ_STR(h.names[3], "[::1]");
    CHECK_EQ_STR(h.names[4], "x");
    CHECK_EQ_INT(conf_parse_hosts("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p", &h, err, sizeof(err)), 0);
    CHECK_EQ_INT(h.n, 16);
    /* a 63-character label, and a 253-character name */
    CHECK_EQ_INT(conf_parse_hosts("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.x",
                                  &h, err, sizeof(err)), 0);
    {
        char name[CONF_HOST_MAX + 2];

        for (size_t i = 0; i < sizeof(name) - 1; i++)
            name[i] = i % 2 ? '.' : 'a';
        name[CONF_HOST_MAX] = '\0';
        CHECK_EQ_INT(conf_parse_hosts(name, &h, err, sizeof(err)), 0);
        CHECK_EQ_STR(h.names[0], name);
        name[CONF_HOST_MAX] = 'a';
        name[CONF_HOST_MAX + 1] = '\0';
        CHECK_EQ_INT(conf_parse_hosts(name, &h, err, sizeof(err)), -1);
    }

    /* an error leaves *out as it was */
    CHECK_EQ_INT(conf_parse_hosts("keep", &h, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(conf_parse_hosts(bad[i].in, &h, err, sizeof(err)), -1);
        if (bad[i].err != NULL)
            CHECK_EQ_STR(err, bad[i].err);
        CHECK(err[0] != '\0');
        CHECK_EQ_INT(h.n, 1);
        CHECK_EQ_STR(h.names[0], "keep");
    }
}

/* A block as text, "ADDR/PREFIX" with the family's inet_ntop. */
static const char *
cidr_text(const struct conf_cidr *b, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN] = "?";

    inet_ntop(b->family, b->addr, a, sizeof(a));
    snprintf(buf, len, "%s/%u", a, b->prefix);
    return buf;
}

#define CIDRS_EXPECTED "(expected addresses or ADDR/PREFIX blocks, e.g. " \
                       "10.0.0.0/8, 2001:db8::/32, 192.0.2.7)"
#define CIDR_NOT_ADDR "is not an IPv4 or IPv6 address (write ADDR or " \
                      "ADDR/PREFIX, e.g. 192.0.2.7 or 10.0.0.0/8; names are " \
                      "not looked up)"

static void
test_cidrs(void)
{
    static const struct { const char *in; const char *want; } good[] = {
        { "10.0.0.0/8", "10.0.0.0/8" },
        { "192.0.2.7", "192.0.2.7/32" },
        { "0.0.0.0/0", "0.0.0.0/0" },
        { "192.0.2.7/32", "192.0.2.7/32" },
        { "10.128.0.0/9", "10.128.0.0/9" },
        { "10.0.0.0/008", "10.0.0.0/8" },
        { "2001:db8::/32", "2001:db8::/32" },
        { "::1", "::1/128" },
        { "::/0", "::/0" },
        { "2001:DB8:0:0:8000::/65", "2001:db8:0:0:8000::/65" },
        { "fe80::/10", "fe80::/10" },
        /* the longest address text, and a prefix with leading zeros */
        { "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/00128",
          "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128" },
        /* IPv4-mapped: stored as the IPv4 block (the matcher takes a mapped
         * client for its IPv4 address) */
        { "::ffff:10.0.0.0/104", "10.0.0.0/8" },
        { "::ffff:192.0.2.7", "192.0.2.7/32" },
        { "::ffff:0.0.0.0/96", "0.0.0.0/0" },
        /* shorter than /96 it covers more than the mapped space: as written */
        { "::/95", "::/95" },
    };
    static const struct { const char *key; const char *err; } bad[] = {
        { "", "empty value " CIDRS_EXPECTED },
        { "10.0.0.0/8,,192.0.2.7", "\"10.0.0.0/8,,192.0.2.7\" has an empty item "
                                   CIDRS_EXPECTED },
        { "10.0.0.0/8,", "\"10.0.0.0/8,\" has an empty item " CIDRS_EXPECTED },
        { ",", "\",\" has an empty item " CIDRS_EXPECTED },
        { "10.1.2.3/8", "\"10.1.2.3/8\" has bits set past its /8: did you mean "
                        "10.0.0.0/8?" },
        { "192.0.2.7/31", "\"192.0.2.7/31\" has bits set past its /31: did you "
                          "mean 192.0.2.6/31?" },
        { "10.0.0.1/0", "\"10.0.0.1/0\" has bits set past its /0: did you mean "
                        "0.0.0.0/0?" },
        { "2001:db8::1/64", "\"2001:db8::1/64\" has bits set past its /64: did "
                            "you mean 2001:db8::/64?" },
        { "::ffff:10.1.0.0/104", "\"::ffff:10.1.0.0/104\" has bits set past its "
                                 "/104: did you mean ::ffff:10.0.0.0/104?" },
        { "10.0.0.0/33", "\"10.0.0.0/33\": the prefix after / is not 0..32" },
        { "::/129", "\"::/129\": the prefix after / is not 0..128" },
        { "10.0.0.0/", "\"10.0.0.0/\": the prefix after / is not 0..32" },
        { "10.0.0.0/-1", "\"10.0.0.0/-1\": the prefix after / is not 0..32" },
        { "10.0.0.0/+8", "\"10.0.0.0/+8\": the prefix after / is not 0..32" },
        { "10.0.0.0/8/8", "\"10.0.0.0/8/8\": the prefix after / is not 0..32" },
        { "10.0.0.0/0x8", "\"10.0.0.0/0x8\": the prefix after / is not 0..32" },
        { "10.0.0.0/99999999999999999999999", "\"10.0.0.0/99999999999999999999999\": "
                                              "the prefix after / is not 0..32" },
        { "lb.example.com", "\"lb.example.com\" " CIDR_NOT_ADDR },
        { "localhost/32", "\"localhost/32\" " CIDR_NOT_ADDR },
        { "10.0.0", "\"10.0.0\" " CIDR_NOT_ADDR },
        { "10.0.0.256", "\"10.0.0.256\" " CIDR_NOT_ADDR },
        { "010.0.0.1", "\"010.0.0.1\" " CIDR_NOT_ADDR },
        { "/8", "\"/8\" " CIDR_NOT_ADDR },
        { "10.0.0.0 /8", "\"10.0.0.0 /8\" " CIDR_NOT_ADDR },
        { "10.0.0.0 10.0.0.1", "\"10.0.0.0 10.0.0.1\" " CIDR_NOT_ADDR },
        { "fe80::1%eth0", "\"fe80::1%eth0\" " CIDR_NOT_ADDR },
        { "1:2:3:4:5:6:7:8:9", "\"1:2:3:4:5:6:7:8:9\" " CIDR_NOT_ADDR },
        { "[2001:db8::]/32", "\"[2001:db8::]/32\": write an IPv6 block without "
                             "brackets (e.g. 2001:db8::/32)" },
        /* an address longer than any address's text */
        { "1111:2222:3333:4444:5555:6666:255.255.255.2555/8",
          "\"1111:2222:3333:4444:5555:6666:255.255.255.2555/8\" " CIDR_NOT_ADDR },
    };
    struct conf_cidrs l;
    char err[512], text[80], many[64 * 16 + 32];
    size_t at = 0;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(conf_parse_cidrs(good[i].in, &l, err, sizeof(err)), 0);
        CHECK_EQ_STR(err, "");
        CHECK_EQ_INT(l.n, 1);
        CHECK_EQ_STR(cidr_text(&l.v[0], text, sizeof(text)), good[i].want);
    }
    CHECK_EQ_INT(conf_parse_cidrs("192.0.2.7", &l, err, sizeof(err)), 0);
    CHECK_EQ_INT(l.v[0].family, AF_INET);
    CHECK_EQ_INT(conf_parse_cidrs("::ffff:192.0.2.7", &l, err, sizeof(err)), 0);
    CHECK_EQ_INT(l.v[0].family, AF_INET);
    CHECK_EQ_INT(conf_parse_cidrs("::1", &l, err, sizeof(err)), 0);
    CHECK_EQ_INT(l.v[0].family, AF_INET6);

    /* lists: blanks around items, mixed families, in the order written */
    CHECK_EQ_INT(conf_parse_cidrs(" 10.0.0.0/8 ,\t2001:db8::/32,192.0.2.7", &l, err,
                                  sizeof(err)), 0);
    CHECK_EQ_INT(l.n, 3);
    CHECK_EQ_STR(cidr_text(&l.v[0], text, sizeof(text)), "10.0.0.0/8");
    CHECK_EQ_STR(cidr_text(&l.v[1], text, sizeof(text)), "2001:db8::/32");
    CHECK_EQ_STR(cidr_text(&l.v[2], text, sizeof(text)), "192.0.2.7/32");
    CHECK_EQ_INT(l.v[1].family, AF_INET6);

    /* CONF_CIDRS_MAX blocks, then one more */
    for (int i = 0; i < CONF_CIDRS_MAX; i++)
        at += (size_t)snprintf(many + at, sizeof(many) - at, "%s10.0.%d.0/24", i ? "," : "",
                               i);
    CHECK_EQ_INT(conf_parse_cidrs(many, &l, err, sizeof(err)), 0);
    CHECK_EQ_INT(l.n, CONF_CIDRS_MAX);
    CHECK_EQ_STR(cidr_text(&l.v[CONF_CIDRS_MAX - 1], text, sizeof(text)), "10.0.63.0/24");
    snprintf(many + at, sizeof(many) - at, ",192.0.2.7");
    CHECK_EQ_INT(conf_parse_cidrs(many, &l, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "more than 64 addresses or blocks (longer lists belong in the "
                 "firewall, e.g. an nftables set)");

    /* an error leaves *out as it was */
    CHECK_EQ_INT(conf_parse_cidrs("192.0.2.0/24", &l, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(conf_parse_cidrs(bad[i].key, &l, err, sizeof(err)), -1);
        CHECK_EQ_STR(err, bad[i].err);
        CHECK_EQ_INT(l.n, 1);
        CHECK_EQ_STR(cidr_text(&l.v[0], text, sizeof(text)), "192.0.2.0/24");
    }
    /* a bad item anywhere in the list fails the whole list */
    CHECK_EQ_INT(conf_parse_cidrs("10.0.0.0/8, 10.1.2.3/16", &l, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"10.1.2.3/16\" has bits set past its /16: did you mean "
                 "10.1.0.0/16?");
    CHECK_EQ_INT(l.n, 1);
}

static void
test_rate(void)
{
    static const struct { const char *in; int rc; uint64_t v; const char *err; }
    cases[] = {
        { "0/s", 0, 0, NULL },
        { "100/s", 0, 100, NULL },
        { "1000000/s", 0, 1000000, NULL },
        { "007/s", 0, 7, NULL },
        { "", -1, 0, "empty value (expected a rate N/s, e.g. 100/s; 0/s for no limit)" },
        { "10", -1, 0, "\"10\" needs its unit: write N/s, e.g. 10/s (new connections "
                       "per second)" },
        { "0", -1, 0, "\"0\" needs its unit: write N/s, e.g. 0/s (new connections per "
                      "second)" },
        { "10/m", -1, 0, "\"10/m\": the rate is per second (write N/s, e.g. 100/s)" },
        { "10/sec", -1, 0, "\"10/sec\": the rate is per second (write N/s, e.g. 100/s)" },
        { "10/S", -1, 0, "\"10/S\": the rate is per second (write N/s, e.g. 100/s)" },
        { "10/", -1, 0, "\"10/\": the rate is per second (write N/s, e.g. 100/s)" },
        { "10/s ", -1, 0, "\"10/s \": the rate is per second (write N/s, e.g. 100/s)" },
        { "/s", -1, 0, "\"/s\" is not a rate (write N/s, e.g. 100/s)" },
        { "x/s", -1, 0, "\"x/s\" is not a rate (write N/s, e.g. 100/s)" },
        { "-1/s", -1, 0, "\"-1/s\" is not a rate (write N/s, e.g. 100/s)" },
        { "1.5/s", -1, 0, "\"1.5/s\" is not a rate (write N/s, e.g. 100/s)" },
        { "10 /s", -1, 0, "\"10 /s\" is not a rate (write N/s, e.g. 100/s)" },
        { "100ms", -1, 0, "\"100ms\" is not a rate (write N/s, e.g. 100/s)" },
        { "99999999999999999999999/s", -1, 0, "\"99999999999999999999999/s\" is too large" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256] = "";
        uint64_t v = 12345;

        CHECK_EQ_INT(conf_parse_rate(cases[i].in, &v, err, sizeof(err)), cases[i].rc);
        if (cases[i].rc == 0) {
            CHECK_EQ_INT(v, cases[i].v);
        } else {
            CHECK_EQ_STR(err, cases[i].err);
            CHECK_EQ_INT(v, 12345);
        }
    }
}

static void
test_name(void)
{
    char long_name[80];

    CHECK(conf_name_is_valid("web"));
    CHECK(conf_name_is_valid("Web_1.a-b"));
    CHECK(!conf_name_is_valid(""));
    CHECK(!conf_name_is_valid("a b"));
    CHECK(!conf_name_is_valid("a/b"));
    CHECK(!conf_name_is_valid("caf\xc3\xa9"));
    memset(long_name, 'a', 63);
    long_name[63] = '\0';
    CHECK(conf_name_is_valid(long_name));
    long_name[63] = 'a';
    long_name[64] = '\0';
    CHECK(!conf_name_is_valid(long_name));
}

static uint16_t
addr_port(const struct conf_addr *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

static const char *
addr_host(const struct conf_addr *a, char *buf, size_t len)
{
    if (a->ss.ss_family == AF_INET)
        return inet_ntop(AF_INET,
                         &((const struct sockaddr_in *)&a->ss)->sin_addr,
                         buf, (socklen_t)len);
    return inet_ntop(AF_INET6,
                     &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, buf,
                     (socklen_t)len);
}

static void
test_addr(void)
{
    struct conf_addr a;
    char err[512], host[64];

    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:8080", false, &a, err,
                                 sizeof(err)), CONF_ADDR_OK);
    CHECK_EQ_STR(a.text, "127.0.0.1:8080");
    CHECK_EQ_INT(a.ss.ss_family, AF_INET);
    CHECK_EQ_INT(a.len, sizeof(struct sockaddr_in));
    CHECK_EQ_INT(addr_port(&a), 8080);
    CHECK_EQ_STR(addr_host(&a, host, sizeof(host)), "127.0.0.1");

    CHECK_EQ_INT(conf_parse_addr("[::1]:443", false, &a, err, sizeof(err)),
                 CONF_ADDR_OK);
    CHECK_EQ_STR(a.text, "[::1]:443");
    CHECK_EQ_INT(a.ss.ss_family, AF_INET6);
    CHECK_EQ_INT(a.len, sizeof(struct sockaddr_in6));
    CHECK_EQ_INT(addr_port(&a), 443);
    CHECK_EQ_STR(addr_host(&a, host, sizeof(host)), "::1");

    /* a name is resolved (localhost is in /etc/hosts everywhere) */
    CHECK_EQ_INT(conf_parse_addr("localhost:80", false, &a, err, sizeof(err)),
                 CONF_ADDR_OK);
    CHECK_EQ_STR(a.text, "localhost:80");
    CHECK_EQ_INT(addr_port(&a), 80);

    /* the wildcard, for listen addresses only */
    CHECK_EQ_INT(conf_parse_addr("*:8080", true, &a, err, sizeof(err)),
                 CONF_ADDR_OK);
    CHECK_EQ_STR(addr_host(&a, host, sizeof(host)), "0.0.0.0");
    CHECK_EQ_STR(a.text, "*:8080");
    CHECK_EQ_INT(conf_parse_addr(":8080", true, &a, err, sizeof(err)),
                 CONF_ADDR_OK);
    CHECK_EQ_STR(addr_host(&a, host, sizeof(host)), "0.0.0.0");
    CHECK_EQ_INT(addr_port(&a), 8080);
    CHECK_EQ_INT(conf_parse_addr("*:8080", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);
    CHECK_EQ_STR(err, "\"*:8080\" has no host");
    CHECK_EQ_INT(conf_parse_addr(":8080", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);

    CHECK_EQ_INT(conf_parse_addr("127.0.0.1", false, &a, err, sizeof(err)),
                 CONF_ADDR_NO_PORT);
    CHECK_EQ_STR(err, "\"127.0.0.1\" has no port (use HOST:PORT or "
                 "[IPV6]:PORT)");
    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:", false, &a, err, sizeof(err)),
                 CONF_ADDR_NO_PORT);
    CHECK_EQ_INT(conf_parse_addr("[::1]", false, &a, err, sizeof(err)),
                 CONF_ADDR_NO_PORT);
    CHECK_EQ_INT(conf_parse_addr("", true, &a, err, sizeof(err)),
                 CONF_ADDR_NO_PORT);

    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:0", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);
    CHECK_EQ_STR(err, "\"127.0.0.1:0\": port \"0\" is not 1..65535");
    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:65536", false, &a, err,
                                 sizeof(err)), CONF_ADDR_BAD);
    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:65535", false, &a, err,
                                 sizeof(err)), CONF_ADDR_OK);
    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:http", false, &a, err,
                                 sizeof(err)), CONF_ADDR_BAD);
    CHECK_EQ_INT(conf_parse_addr("127.0.0.1:+80", false, &a, err,
                                 sizeof(err)), CONF_ADDR_BAD);
    CHECK_EQ_INT(conf_parse_addr("::1:80", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);
    CHECK_EQ_STR(err, "\"::1:80\": write an IPv6 address in brackets "
                 "([::1]:80)");
    CHECK_EQ_INT(conf_parse_addr("[::1:80", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);
    CHECK_EQ_INT(conf_parse_addr("[::1]80", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);
    CHECK_EQ_INT(conf_parse_addr("[]:80", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);
    CHECK_EQ_INT(conf_parse_addr("[127.0.0.1]:80", false, &a, err,
                                 sizeof(err)), CONF_ADDR_BAD);
    CHECK_EQ_STR(err, "\"[127.0.0.1]:80\": \"127.0.0.1\" is not an IPv6 "
                 "address");
    CHECK_EQ_INT(conf_parse_addr("a b:80", false, &a, err, sizeof(err)),
                 CONF_ADDR_BAD);

    /* .invalid never resolves (RFC 6761) and fails without a DNS query */
    CHECK_EQ_INT(conf_parse_addr("nohost.invalid:80", false, &a, err,
                                 sizeof(err)), CONF_ADDR_UNRESOLVED);
    CHECK(strncmp(err, "address \"nohost.invalid:80\" does not resolve (",
                  strlen("address \"nohost.invalid:80\" does not resolve ("))
          == 0);
}

static void
test_addr_overlaps(void)
{
    struct conf_addr a, b, c, d, w, v6, v6w;
    char err[256];

    conf_parse_addr("127.0.0.1:80", false, &a, err, sizeof(err));
    conf_parse_addr("127.0.0.1:80", false, &b, err, sizeof(err));
    conf_parse_addr("127.0.0.1:81", false, &c, err, sizeof(err));
    conf_parse_addr("127.0.0.2:80", false, &d, err, sizeof(err));
    conf_parse_addr("*:80", true, &w, err, sizeof(err));
    conf_parse_addr("[::1]:80", false, &v6, err, sizeof(err));
    conf_parse_addr("[::]:80", false, &v6w, err, sizeof(err));
    CHECK(conf_addr_overlaps(&a, &b));
    CHECK(!conf_addr_overlaps(&a, &c));
    CHECK(!conf_addr_overlaps(&a, &d));
    CHECK(conf_addr_overlaps(&a, &w));
    CHECK(conf_addr_overlaps(&w, &d));
    CHECK(!conf_addr_overlaps(&a, &v6));
    CHECK(conf_addr_overlaps(&v6, &v6w));
    CHECK(conf_addr_overlaps(&v6, &v6));
}

/* conf_parse_server, the address text of the previous parse freed first
 * (each success allocates one). */
static int
parse_server(const char *s, char *name, struct conf_server *srv, char *err, size_t errlen)
{
    free(srv->addr.text);
    srv->addr.text = NULL;
    return conf_parse_server(s, name, srv, err, errlen);
}

static void
test_server(void)
{
    struct conf_server srv = { 0 };
    char name[CONF_NAME_MAX + 1], err[512];

    CHECK_EQ_INT(parse_server("web1 127.0.0.1:9001 weight=3", name, &srv,
                                   err, sizeof(err)), 0);
    CHECK_EQ_STR(name, "web1");
    CHECK_EQ_STR(srv.addr.text, "127.0.0.1:9001");
    CHECK_EQ_INT(srv.weight, 3);
    CHECK_EQ_INT(parse_server("web2\t127.0.0.1:9002", name, &srv, err,
                                   sizeof(err)), 0);
    CHECK_EQ_STR(name, "web2");
    CHECK_EQ_INT(srv.weight, 1);
    CHECK_EQ_INT(parse_server("w [::1]:1 weight=256", name, &srv, err,
                                   sizeof(err)), 0);
    CHECK_EQ_INT(srv.weight, 256);
    CHECK_EQ_INT(srv.max_connections, 0);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 max_connections=50 weight=2", name,
                                   &srv, err, sizeof(err)), 0);
    CHECK_EQ_INT(srv.max_connections, 50);
    CHECK_EQ_INT(srv.weight, 2);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 max_connections=1000001", name,
                                   &srv, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: max_connections 1000001 is out of range (0..1000000)");
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 max_connections=5 max_connections=5",
                                   name, &srv, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: max_connections is given twice");
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 maxconn=5", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: unknown option \"maxconn=5\" (use NAME HOST:PORT "
                 "[weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])");

    /* send_proxy=: the server's own version, else "the pool's" until
     * conf_load or conf_pool_add_server resolves it */
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1", name, &srv, err, sizeof(err)), 0);
    CHECK(srv.send_proxy == CONF_PROXY_POOL);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=v2 weight=2", name, &srv, err,
                                   sizeof(err)), 0);
    CHECK_EQ_INT(srv.send_proxy, CONF_PROXY_V2);
    CHECK_EQ_INT(srv.weight, 2);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=v1", name, &srv, err,
                                   sizeof(err)), 0);
    CHECK_EQ_INT(srv.send_proxy, CONF_PROXY_V1);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=off", name, &srv, err,
                                   sizeof(err)), 0);
    CHECK_EQ_INT(srv.send_proxy, CONF_PROXY_OFF);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=V2", name, &srv, err,
                                   sizeof(err)), 0);
    CHECK_EQ_INT(srv.send_proxy, CONF_PROXY_V2);
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=any", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: send_proxy \"any\" is not one of off, v1 or v2");
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: send_proxy \"\" is not one of off, v1 or v2");
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=v2v2v2v2v2v2v2v2v2v2v2v2v2v2v2v2v2",
                                   name, &srv, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: send_proxy \"v2v2v2v2v2v2v2v2v2v2v2v2v2v2v2v\" is not one "
                 "of off, v1 or v2");      /* cut at 31 characters */
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send_proxy=v1 send_proxy=v2", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: send_proxy is given twice");
    CHECK_EQ_INT(parse_server("w 127.0.0.1:1 send-proxy", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server w: unknown option \"send-proxy\" (use NAME HOST:PORT "
                 "[weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])");

    CHECK_EQ_INT(parse_server("web1 127.0.0.1", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server: \"web1 127.0.0.1\" has no port (use NAME "
                 "HOST:PORT [weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])");
    CHECK_EQ_INT(parse_server("web1", name, &srv, err, sizeof(err)),
                 -1);
    CHECK_EQ_STR(err, "server: \"web1\" has no address (use NAME HOST:PORT "
                 "[weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])");
    CHECK_EQ_INT(parse_server("", name, &srv, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server: empty value (use NAME HOST:PORT [weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])");
    CHECK_EQ_INT(parse_server("web/1 127.0.0.1:1", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server: name \"web/1\" is invalid (use 1 to 63 of "
                 "A-Z a-z 0-9 _ . - : @ [ ])");
    /* a discovered server's name: target:port, address@... */
    CHECK_EQ_INT(parse_server("web1.example:8080@10.0.0.1:8080 10.0.0.1:8080", name, &srv,
                                   err, sizeof(err)), 0);
    CHECK_EQ_STR(name, "web1.example:8080@10.0.0.1:8080");
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 weight=0", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server web1: weight 0 is out of range (1..256)");
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 weight=257", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server web1: weight 257 is out of range (1..256)");
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 weight=x", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server web1: weight \"x\" is not a number");
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 weight=", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 weight=-1", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 weight=1 weight=2",
                                   name, &srv, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server web1: weight is given twice");
    CHECK_EQ_INT(parse_server("web1 127.0.0.1:1 backup", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "server web1: unknown option \"backup\" (use NAME "
                 "HOST:PORT [weight=N] [max_connections=N] [send_proxy=off|v1|v2] [agent_port=N])");
    CHECK_EQ_INT(parse_server("web1 *:80", name, &srv, err,
                                   sizeof(err)), -1);
    CHECK_EQ_STR(err, "server web1: \"*:80\" has no host");
    CHECK_EQ_INT(parse_server("web1 nohost.invalid:80", name, &srv,
                                   err, sizeof(err)), -1);
    CHECK(strncmp(err, "server web1: address \"nohost.invalid:80\" does not "
                  "resolve (", 52) == 0);
    free(srv.addr.text);
}

static void
test_find_binary(void)
{
    unsigned char byte = 0;
    size_t col = 0;
    int line = 0;

    CHECK(!conf_find_binary("", 0, &line, &col, &byte));
    CHECK(!conf_find_binary("a = b\r\n\tc\n", 10, &line, &col, &byte));
    CHECK(!conf_find_binary("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n", 15,
                            &line, &col, &byte));
    CHECK(!conf_find_binary("\xef\xbb\xbf[global]\n", 12, &line, &col, &byte));
    CHECK(!conf_find_binary("x\r", 2, &line, &col, &byte));

    CHECK(conf_find_binary("ab\ncd\0e\n", 8, &line, &col, &byte));
    CHECK_EQ_INT(line, 2);
    CHECK_EQ_INT(col, 3);
    CHECK_EQ_INT(byte, 0);
    CHECK(conf_find_binary("\x1b[31m", 5, &line, &col, &byte));
    CHECK_EQ_INT(line, 1);
    CHECK_EQ_INT(col, 1);
    CHECK_EQ_INT(byte, 0x1b);
    CHECK(conf_find_binary("a\rb", 3, &line, &col, &byte));
    CHECK_EQ_INT(col, 2);
    CHECK(conf_find_binary("\x7f", 1, &line, &col, &byte));
    CHECK(conf_find_binary("\n\nab\xff", 5, &line, &col, &byte));
    CHECK_EQ_INT(line, 3);
    CHECK_EQ_INT(col, 3);
    CHECK_EQ_INT(byte, 0xff);
    CHECK(conf_find_binary("\xc3", 1, &line, &col, &byte));       /* cut */
    CHECK(conf_find_binary("\xc3(", 2, &line, &col, &byte));      /* bad 2nd */
    CHECK(conf_find_binary("\xc0\xaf", 2, &line, &col, &byte));   /* overlong */
    CHECK(conf_find_binary("\xe0\x80\xaf", 3, &line, &col, &byte));
    CHECK(conf_find_binary("\xed\xa0\x80", 3, &line, &col, &byte)); /* UTF-16
                                                                       half */
    CHECK(conf_find_binary("\xf4\x90\x80\x80", 4, &line, &col, &byte));
    CHECK(conf_find_binary("\xf5\x80\x80\x80", 4, &line, &col, &byte));
}

int
main(void)
{
    test_duration();
    test_format_duration();
    test_uint();
    test_bool();
    test_enum();
    test_count_or_percent();
    test_expect();
    test_hosts();
    test_cidrs();
    test_rate();
    test_name();
    test_addr();
    test_addr_overlaps();
    test_server();
    test_find_binary();
    return CHECK_DONE();
}
