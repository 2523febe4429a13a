/*
 * conf_dgram_test.c - the datagram checks' keys (conf/conf_dgram.c): the
 * value parsers with their exact messages, the bytes written back as text
 * (and read again to the same bytes), and whole files through
 * conf_load_text: defaults, every key set, and each key refused with a
 * check that would ignore it, at its own line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "conf_fixture.h"
#include "conf.h"
#include "conf_value.h"

#define FRONTEND "[frontend web]\nlisten = 127.0.0.1:8080\npool = web\n"
#define POOL "[pool web]\nserver = web1 127.0.0.1:53\n"      /* lines 4, 5 */

struct bytes_case {
    const char *in;
    int rc;
    size_t len;
    const char *bytes;              /* len bytes, or the message */
};

static void
test_bytes(void)
{
    static const struct bytes_case cases[] = {
        { "", 0, 0, "" },
        { "PING\\r\\n", 0, 6, "PING\r\n" },
        { "a\\\\b\\tc\\0d", 0, 7, "a\\b\tc\0d" },
        { "\\x00\\xffA\\x3b", 0, 4, "\0\xff" "A;" },
        { "0x", -1, 0, "\"0x\" has no hex digits after 0x" },
        { "0x0001fF", 0, 3, "\0\x01\xff" },
        { "0X0a", 0, 1, "\n" },
        { "0x123", -1, 0, "\"0x123\" has an odd number of hex digits (two a byte)" },
        { "0x12 34", -1, 0, "\"0x12 34\" is not hex after its 0x (use 0-9 and a-f, two digits "
                            "a byte)" },
        { "0xzz", -1, 0, "\"0xzz\" is not hex after its 0x (use 0-9 and a-f, two digits a "
                         "byte)" },
        { "x0x12", 0, 5, "x0x12" },
        { "PING\\q", -1, 0, "\"\\q\" in \"PING\\q\" is not an escape (use \\\\, \\r, \\n, \\t, "
                            "\\0 or \\xHH with two hex digits)" },
        { "end\\", -1, 0, "\"\\\" in \"end\\\" is not an escape (use \\\\, \\r, \\n, \\t, \\0 "
                          "or \\xHH with two hex digits)" },
        { "\\x4", -1, 0, "\"\\x4\" in \"\\x4\" is not an escape (use \\\\, \\r, \\n, \\t, \\0 "
                         "or \\xHH with two hex digits)" },
    };
    char err[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct conf_bytes b = { .len = 99 };
        int rc = conf_parse_bytes(cases[i].in, &b, err, sizeof(err));

        CHECK_EQ_INT(rc, cases[i].rc);
        if (rc == 0) {
            CHECK_EQ_INT(b.len, cases[i].len);
            CHECK(memcmp(b.v, cases[i].bytes, cases[i].len) == 0);
        } else {
            CHECK_EQ_STR(err, cases[i].bytes);
            CHECK_EQ_INT(b.len, 99);                /* untouched */
        }
    }
}

/* The longest values: CONF_BYTES_MAX bytes in either form, one more
 * refused. */
static void
test_bytes_bounds(void)
{
    char in[2 * CONF_BYTES_MAX + 8], err[128];
    struct conf_bytes b;

    memset(in, 'a', CONF_BYTES_MAX);
    in[CONF_BYTES_MAX] = '\0';
    CHECK_EQ_INT(conf_parse_bytes(in, &b, err, sizeof(err)), 0);
    CHECK_EQ_INT(b.len, CONF_BYTES_MAX);
    strcat(in, "a");
    CHECK_EQ_INT(conf_parse_bytes(in, &b, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "longer than 256 bytes");
    memcpy(in, "0x", 2);
    memset(in + 2, 'f', 2 * CONF_BYTES_MAX);
    in[2 + 2 * CONF_BYTES_MAX] = '\0';
    CHECK_EQ_INT(conf_parse_bytes(in, &b, err, sizeof(err)), 0);
    CHECK_EQ_INT(b.len, CONF_BYTES_MAX);
    CHECK_EQ_INT(b.v[CONF_BYTES_MAX - 1], 0xff);
    strcat(in, "ff");
    CHECK_EQ_INT(conf_parse_bytes(in, &b, err, sizeof(err)), -1);
}

/* Written back: as the file would write them, so that the text read again
 * (through the parser, as inih hands it over) is the same bytes. */
static void
test_bytes_text(void)
{
    static const struct { const char *b; size_t len; const char *text; } cases[] = {
        { "PONG\r\n", 6, "PONG\\r\\n" },
        { "a\\b\t\0", 5, "a\\\\b\\t\\0" },
        { "\x01\x7f\x80;", 4, "\\x01\\x7f\\x80\\x3b" },
        { " x ", 3, "\\x20x\\x20" },                  /* inih strips blanks */
        { "0x12", 4, "\\x30x12" },                    /* not the hex form */
        { "0", 1, "0" },
        { "", 0, "" },
    };
    char text[64], err[128];
    struct conf_bytes b;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        conf_bytes_text((const uint8_t *)cases[i].b, cases[i].len, text, sizeof(text));
        CHECK_EQ_STR(text, cases[i].text);
        CHECK_EQ_INT(conf_parse_bytes(text, &b, err, sizeof(err)), 0);
        CHECK_EQ_INT(b.len, cases[i].len);
        CHECK(memcmp(b.v, cases[i].b, cases[i].len) == 0);
    }
    /* cut with "...", never inside an escape; all of it when it fits */
    conf_bytes_text((const uint8_t *)"abcdefgh", 8, text, 8);
    CHECK_EQ_STR(text, "abcd...");
    conf_bytes_text((const uint8_t *)"abcdefg", 7, text, 8);
    CHECK_EQ_STR(text, "abcdefg");
    conf_bytes_text((const uint8_t *)"ab\r\n\t", 5, text, 8);
    CHECK_EQ_STR(text, "ab\\r...");
    conf_bytes_text((const uint8_t *)"\x01\x02", 2, text, 8);
    CHECK_EQ_STR(text, "\\x01...");
    conf_bytes_text((const uint8_t *)"abc", 3, text, 1);
    CHECK_EQ_STR(text, "");
}

static void
test_dns_values(void)
{
    char err[256];
    uint16_t v = 0;

    CHECK_EQ_INT(conf_parse_dns_type("aaaa", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 28);
    CHECK_EQ_INT(conf_parse_dns_type("TYPE64", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 64);
    CHECK_EQ_INT(conf_parse_dns_type("SOAP", &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"SOAP\" is not a DNS type (use A, AAAA, NS, MX, TXT, CNAME, PTR, SRV, "
                 "SOA, ANY or TYPEnnn, nnn 1..65535)");
    CHECK_EQ_INT(conf_parse_dns_type("TYPE0", &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(v, 64);

    CHECK_EQ_INT(conf_parse_dns_rcodes("NOERROR", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(conf_parse_dns_rcodes(" noerror , NXDOMAIN,REFUSED,NXDOMAIN", &v, err,
                                       sizeof(err)), 0);
    CHECK_EQ_INT(v, 1 | 1 << 3 | 1 << 5);
    CHECK_EQ_INT(conf_parse_dns_rcodes("NOTZONE", &v, err, sizeof(err)), 0);
    CHECK_EQ_INT(v, 1 << 10);
    CHECK_EQ_INT(conf_parse_dns_rcodes("NOERROR, NXDOMIAN", &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"NXDOMIAN\" is not an rcode (use NOERROR, FORMERR, SERVFAIL, NXDOMAIN, "
                 "NOTIMP, REFUSED, YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH or NOTZONE)");
    CHECK_EQ_INT(conf_parse_dns_rcodes("NOERROR,", &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "\"NOERROR,\" has an empty item (expected rcode names, e.g. NOERROR, "
                 "NXDOMAIN)");
    CHECK_EQ_INT(conf_parse_dns_rcodes("", &v, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "empty value (expected rcode names, e.g. NOERROR, NXDOMAIN)");
    CHECK_EQ_INT(conf_parse_dns_rcodes("0", &v, err, sizeof(err)), -1);
    CHECK_EQ_INT(v, 1 << 10);
}

static void
test_load(void)
{
    char *errors;
    struct conf *c = conf_fixture_load(FRONTEND POOL "check = dns\n", &errors);
    const struct conf_pool *p;

    CHECK(c != NULL && errors == NULL);
    if (c == NULL)
        return;
    p = &c->pools[0];
    CHECK_EQ_INT(p->check, CONF_CHECK_DNS);
    CHECK_EQ_STR(conf_check_name(p->check), "dns");
    CHECK_EQ_STR(p->check_dns_name, ".");
    CHECK_EQ_INT(p->check_dns_type, 6);             /* SOA */
    CHECK_EQ_INT(p->check_dns_rcodes, 1);           /* NOERROR */
    CHECK_EQ_INT(p->check_send.len, 0);
    CHECK_EQ_INT(p->check_expect_bytes.len, 0);
    conf_free(c);

    c = conf_fixture_load(FRONTEND POOL "check = dns\ncheck_dns_name = Www.Example.test.\n"
             "check_dns_type = txt\ncheck_dns_rcode = NOERROR, NXDOMAIN\n"
             "[pool u]\nserver = u1 127.0.0.1:7\ncheck = udp\ncheck_send = PING\\r\\n\n"
             "check_expect_bytes = 0x504f4e47 ; PONG\ncheck_port = 9\n", &errors);
    CHECK(c != NULL && errors == NULL);
    if (c == NULL) {
        fprintf(stderr, "%s", errors);
        free(errors);
        return;
    }
    p = &c->pools[0];
    CHECK_EQ_STR(p->check_dns_name, "Www.Example.test.");
    CHECK_EQ_INT(p->check_dns_type, 16);
    CHECK_EQ_INT(p->check_dns_rcodes, 1 | 1 << 3);
    p = &c->pools[1];
    CHECK_EQ_STR(conf_check_name(p->check), "udp");
    CHECK_EQ_INT(p->check_send.len, 6);
    CHECK(memcmp(p->check_send.v, "PING\r\n", 6) == 0);
    CHECK_EQ_INT(p->check_expect_bytes.len, 4);
    CHECK(memcmp(p->check_expect_bytes.v, "PONG", 4) == 0);
    CHECK_EQ_INT(p->check_port, 9);
    /* a copy carries the values (conf_dup, a reload's) */
    struct conf *d = conf_dup(c);
    CHECK(d != NULL && strcmp(d->pools[0].check_dns_name, "Www.Example.test.") == 0 &&
          d->pools[1].check_send.len == 6);
    conf_free(d);
    conf_free(c);
}

static void
test_load_errors(void)
{
    /* bad values, at their lines */
    EXPECT_ERRORS(FRONTEND POOL "check = dns\ncheck_dns_type = AXFR\ncheck_dns_rcode = OK\n"
                  "check_dns_name = a..b\n",
                  "t.ini:7: check_dns_type: \"AXFR\" is not a DNS type (use A, AAAA, NS, MX, "
                  "TXT, CNAME, PTR, SRV, SOA, ANY or TYPEnnn, nnn 1..65535)\n"
                  "t.ini:8: check_dns_rcode: \"OK\" is not an rcode (use NOERROR, FORMERR, "
                  "SERVFAIL, NXDOMAIN, NOTIMP, REFUSED, YXDOMAIN, YXRRSET, NXRRSET, NOTAUTH or "
                  "NOTZONE)\n"
                  "t.ini:9: check_dns_name: \"a..b\" is not a DNS name (labels of 1 to 63 of "
                  "A-Z a-z 0-9 - _, at most 253 characters; . for the root)\n");
    EXPECT_ERRORS(FRONTEND POOL "check = udp\ncheck_send = 0xabc\n",
                  "t.ini:7: check_send: \"0xabc\" has an odd number of hex digits (two a byte)\n");
    /* each key with a check that ignores it (the default tcp too), before
     * or after the check line */
    EXPECT_ERRORS(FRONTEND POOL "check_dns_name = example.test\ncheck = tcp\n"
                  "check_dns_type = A\ncheck_dns_rcode = NOERROR\ncheck_send = x\n"
                  "check_expect_bytes = y\n",
                  "t.ini:6: check_dns_name needs check = dns\n"
                  "t.ini:8: check_dns_type needs check = dns\n"
                  "t.ini:9: check_dns_rcode needs check = dns\n"
                  "t.ini:10: check_send needs check = udp\n"
                  "t.ini:11: check_expect_bytes needs check = udp\n");
    EXPECT_ERRORS(FRONTEND POOL "check_dns_type = A\n",
                  "t.ini:6: check_dns_type needs check = dns\n");
    EXPECT_ERRORS(FRONTEND POOL "check = dns\ncheck_send = x\n",
                  "t.ini:7: check_send needs check = udp\n");
    EXPECT_ERRORS(FRONTEND POOL "check = udp\ncheck_dns_name = x\ncheck_send = x\n",
                  "t.ini:7: check_dns_name needs check = dns\n");
    /* udp needs something to send; neither takes a PROXY header */
    EXPECT_ERRORS(FRONTEND POOL "check = udp\n",
                  "t.ini:6: pool web: check = udp needs check_send (the datagram to send)\n");
    EXPECT_ERRORS(FRONTEND POOL "check = udp\ncheck_send =\n",
                  "t.ini:7: pool web: check = udp needs check_send (the datagram to send)\n");
    EXPECT_ERRORS(FRONTEND POOL "check = dns\ncheck_send_proxy = on\n",
                  "t.ini:7: check_send_proxy = on needs a check over TCP (check = dns sends "
                  "datagrams)\n");
    /* a rejected check is one message, not one per key */
    EXPECT_ERRORS(FRONTEND POOL "check = dnss\ncheck_dns_type = A\n",
                  "t.ini:6: check: \"dnss\" is not one of none, tcp, http, https, mysql, pgsql, "
                  "redis, dns, udp or grpc\n");
}

int
main(void)
{
    test_bytes();
    test_bytes_bounds();
    test_bytes_text();
    test_dns_values();
    test_load();
    test_load_errors();
    return CHECK_DONE();
}
