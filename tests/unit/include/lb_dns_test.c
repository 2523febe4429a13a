/* Tests include/lb_dns.h: type and rcode names both ways (their words are
 * the config's and the logs'), and the query on the wire: the root, a name
 * with and without its final dot, EDNS0 or none, and each refusal (empty
 * and long labels, a name past 255 wire bytes, a buffer too small). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "lb_dns.h"

static void
test_types(void)
{
    char buf[LB_DNS_TEXT_MAX];
    uint16_t t = 0;

    CHECK(lb_dns_type_parse("SOA", 3, &t) && t == 6);
    CHECK(lb_dns_type_parse("aaaa", 4, &t) && t == 28);
    CHECK(lb_dns_type_parse("Any", 3, &t) && t == 255);
    CHECK(lb_dns_type_parse("TYPE65", 6, &t) && t == 65);
    CHECK(lb_dns_type_parse("type65535", 9, &t) && t == 65535);
    CHECK(lb_dns_type_parse("TXTX", 3, &t) && t == 16);    /* n bytes only */
    t = 7;
    CHECK(!lb_dns_type_parse("TYPE0", 5, &t));
    CHECK(!lb_dns_type_parse("TYPE065", 7, &t));
    CHECK(!lb_dns_type_parse("TYPE65536", 9, &t));
    CHECK(!lb_dns_type_parse("TYPE", 4, &t));
    CHECK(!lb_dns_type_parse("TYPE1x", 6, &t));
    CHECK(!lb_dns_type_parse("HTTPS", 5, &t));
    CHECK(!lb_dns_type_parse("", 0, &t));
    CHECK_EQ_INT(t, 7);                                     /* untouched */
    CHECK_EQ_STR(lb_dns_type_text(1, buf, sizeof(buf)), "A");
    CHECK_EQ_STR(lb_dns_type_text(33, buf, sizeof(buf)), "SRV");
    CHECK_EQ_STR(lb_dns_type_text(65, buf, sizeof(buf)), "TYPE65");
    CHECK_EQ_STR(lb_dns_type_text(65535, buf, sizeof(buf)), "TYPE65535");
}

static void
test_rcodes(void)
{
    static const char *const want[] = {
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
        "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE", "RCODE11", "RCODE15",
    };
    char buf[LB_DNS_TEXT_MAX];

    for (int i = 0; i <= 10; i++) {
        CHECK_EQ_STR(lb_dns_rcode_text(i, buf, sizeof(buf)), want[i]);
        CHECK_EQ_INT(lb_dns_rcode_parse(want[i], strlen(want[i])), i);
    }
    CHECK_EQ_STR(lb_dns_rcode_text(11, buf, sizeof(buf)), want[11]);
    CHECK_EQ_STR(lb_dns_rcode_text(15, buf, sizeof(buf)), want[12]);
    CHECK_EQ_INT(lb_dns_rcode_parse("nxdomain", 8), 3);
    CHECK_EQ_INT(lb_dns_rcode_parse("NXDOMAINS", 9), -1);
    CHECK_EQ_INT(lb_dns_rcode_parse("RCODE11", 7), -1);
    CHECK_EQ_INT(lb_dns_rcode_parse("3", 1), -1);
    CHECK_EQ_INT(lb_dns_rcode_parse("", 0), -1);
}

static void
test_query(void)
{
    static const uint8_t root[] = { 0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
                                    0, 0, 6, 0, 1 };
    static const uint8_t www[] = { 3, 'w', 'w', 'w', 2, 'E', 'x', 0, 0, 1, 0, 1 };
    uint8_t buf[LB_DNS_QUERY_MAX + 8];
    char name[300];

    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 0xabcd, ".", 6, true, 0), sizeof(root));
    CHECK(memcmp(buf, root, sizeof(root)) == 0);
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 0xabcd, "", 6, true, 0), sizeof(root));
    CHECK(memcmp(buf, root, sizeof(root)) == 0);

    /* a final dot or not: the same question; case is kept */
    for (int dot = 0; dot < 2; dot++) {
        CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 7, dot ? "www.Ex." : "www.Ex", 1, false, 0),
                     12 + sizeof(www));
        CHECK_EQ_INT(buf[2], 0);                            /* no RD */
        CHECK_EQ_INT(buf[11], 0);                           /* no OPT */
        CHECK(memcmp(buf + 12, www, sizeof(www)) == 0);
    }
    /* EDNS0: one additional record, the payload size in its class */
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 7, "www.Ex", 1, true, 4096),
                 12 + sizeof(www) + LB_DNS_OPT_LEN);
    CHECK_EQ_INT(buf[11], 1);
    CHECK_EQ_INT(lb_dns_get16(buf + 12 + sizeof(www) + 1), LB_DNS_TYPE_OPT);
    CHECK_EQ_INT(lb_dns_get16(buf + 12 + sizeof(www) + 3), 4096);

    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, "a..b", 1, true, 0), -1);
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, ".a", 1, true, 0), -1);
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, "a..", 1, true, 0), -1);
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, "..", 1, true, 0), -1);
    memset(name, 'a', 64);
    name[64] = '\0';
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, name, 1, true, 0), -1);   /* 64-byte label */
    name[63] = '\0';
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, name, 1, true, 0), 12 + 65 + 4);
    /* 253 text bytes are 255 on the wire: the longest name */
    for (int i = 0; i < 253; i++)
        name[i] = i % 2 ? '.' : 'x';
    name[253] = '\0';
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, name, 1, true, 4096), LB_DNS_QUERY_MAX);
    name[253] = '.';
    name[254] = '\0';                                       /* a final dot adds nothing */
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, name, 1, true, 4096), LB_DNS_QUERY_MAX);
    name[253] = 'x';
    name[254] = 'x';
    name[255] = '\0';
    CHECK_EQ_INT(lb_dns_query(buf, sizeof(buf), 1, name, 1, true, 0), -1);
    /* the buffer: exactly enough, one byte short */
    CHECK_EQ_INT(lb_dns_query(buf, 12 + sizeof(www), 7, "www.Ex", 1, true, 0), 12 + sizeof(www));
    CHECK_EQ_INT(lb_dns_query(buf, 11 + sizeof(www), 7, "www.Ex", 1, true, 0), -1);
    CHECK_EQ_INT(lb_dns_query(buf, 12 + sizeof(www) + 10, 7, "www.Ex", 1, true, 512), -1);
}

int
main(void)
{
    test_types();
    test_rcodes();
    test_query();
    return CHECK_DONE();
}
