/* Tests health/dgram.c: what a dns or udp probe sends, the verdict on each
 * datagram and its detail (the words the logs and /stats show), the
 * datagrams a dns probe ignores and the timeout's detail that counts
 * them. */
#include <string.h>

#include "check.h"
#include "dgram.h"

static struct hc_spec
dns_spec(const char *name, uint16_t type, uint16_t rcodes)
{
    struct hc_spec sp = { .kind = CONF_CHECK_DNS, .dns_name = name, .dns_type = type,
                          .dns_rcodes = rcodes };
    return sp;
}

/* The answer to d's query: its bytes with QR, rcode and an answer count. */
static size_t
answer_of(const struct hc_dgram *d, uint8_t *m, int rcode, unsigned answers)
{
    memcpy(m, d->out, d->out_len);
    m[2] |= 0x80;
    m[3] = (uint8_t)rcode;
    m[7] = (uint8_t)answers;
    return d->out_len;
}

static void
test_dns(void)
{
    struct hc_spec sp = dns_spec(".", 6, 1);
    struct hc_dgram d;
    uint8_t m[HC_DGRAM_IN_MAX];
    char detail[HC_DETAIL_MAX];
    bool passed = false;
    size_t n;

    CHECK_EQ_INT(hc_dgram_begin(&d, &sp, 0xbeef), 0);
    CHECK_EQ_INT(d.out_len, 17);                    /* header, root, type, class */
    CHECK_EQ_INT(d.out[0], 0xbe);
    CHECK_EQ_INT(d.out[1], 0xef);
    n = answer_of(&d, m, 0, 1);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(passed);
    CHECK_EQ_STR(detail, "rcode NOERROR, 1 answer");
    n = answer_of(&d, m, 0, 2);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK_EQ_STR(detail, "rcode NOERROR, 2 answers");
    n = answer_of(&d, m, 5, 0);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "rcode REFUSED");
    n = answer_of(&d, m, 12, 0);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "rcode RCODE12");
    CHECK_EQ_INT(d.ignored, 0);

    /* check_dns_rcode = NOERROR, NXDOMAIN */
    sp = dns_spec("nx.example.test", 1, 1 | 1 << 3);
    CHECK_EQ_INT(hc_dgram_begin(&d, &sp, 7), 0);
    n = answer_of(&d, m, 3, 0);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(passed);
    CHECK_EQ_STR(detail, "rcode NXDOMAIN, 0 answers");
    n = answer_of(&d, m, 2, 0);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "rcode SERVFAIL");

    /* a name conf/ refuses cannot be asked */
    sp = dns_spec("a..b", 1, 1);
    CHECK_EQ_INT(hc_dgram_begin(&d, &sp, 7), -1);
}

/* Datagrams that are not the answer are counted and waited past; the
 * answer after them still decides. */
static void
test_dns_ignored(void)
{
    struct hc_spec sp = dns_spec("example.test", 6, 1);
    struct hc_dgram d;
    uint8_t m[HC_DGRAM_IN_MAX];
    char detail[HC_DETAIL_MAX] = "untouched";
    bool passed = false;
    size_t n;

    CHECK_EQ_INT(hc_dgram_begin(&d, &sp, 0x0102), 0);
    hc_dgram_timeout(&d, 300, detail, sizeof(detail));
    CHECK_EQ_STR(detail, "timeout: no reply in 300 ms");
    strcpy(detail, "untouched");
    n = answer_of(&d, m, 0, 1);
    m[1] ^= 1;                                      /* another id */
    CHECK(!hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK_EQ_STR(detail, "untouched");
    hc_dgram_timeout(&d, 300, detail, sizeof(detail));
    CHECK_EQ_STR(detail, "timeout: no answer in 300 ms (1 reply ignored, the last: wrong id)");
    n = answer_of(&d, m, 0, 1);
    m[2] &= 0x7f;                                   /* our query, echoed */
    CHECK(!hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(!hc_dgram_reply(&d, m, 5, 5, &passed, detail, sizeof(detail)));
    hc_dgram_timeout(&d, 1000, detail, sizeof(detail));
    CHECK_EQ_STR(detail, "timeout: no answer in 1000 ms (3 replies ignored, the last: "
                 "truncated header)");
    n = answer_of(&d, m, 0, 1);
    m[14] = 'y';
    CHECK(!hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK_EQ_INT(d.last_ignored, HC_DNS_QUESTION_MISMATCH);
    n = answer_of(&d, m, 0, 1);
    CHECK(hc_dgram_reply(&d, m, n, n, &passed, detail, sizeof(detail)));
    CHECK(passed);
    CHECK_EQ_INT(d.ignored, 4);
}

static void
test_udp(void)
{
    struct hc_spec sp = { .kind = CONF_CHECK_UDP, .send = (const uint8_t *)"PING\r\n",
                          .send_len = 6, .expect_bytes = (const uint8_t *)"PONG",
                          .expect_bytes_len = 4 };
    uint8_t big[HC_DGRAM_IN_MAX];
    char detail[HC_DETAIL_MAX];
    struct hc_dgram d;
    bool passed = false;

    CHECK_EQ_INT(hc_dgram_begin(&d, &sp, 0x4242), 0);
    CHECK_EQ_INT(d.out_len, 6);
    CHECK(memcmp(d.out, "PING\r\n", 6) == 0);       /* no id: the bytes as given */
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"PONG 1\r\n", 8, 8, &passed, detail,
                         sizeof(detail)));
    CHECK(passed);
    CHECK_EQ_STR(detail, "reply \"PONG 1\\r\\n\" (8 bytes)");
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"PONG", 4, 4, &passed, detail, sizeof(detail)));
    CHECK(passed);
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"PON", 3, 3, &passed, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "reply \"PON\" (3 bytes) does not start with check_expect_bytes");
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"PANG\x01", 5, 5, &passed, detail,
                         sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "reply \"PANG\\x01\" (5 bytes) does not start with check_expect_bytes");
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"", 0, 0, &passed, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "reply \"\" (0 bytes) does not start with check_expect_bytes");

    /* a long binary reply: cut in the detail, which keeps its end; the
     * length is the datagram's, not what was read of it */
    memset(big, 0x80, sizeof(big));
    CHECK(hc_dgram_reply(&d, big, sizeof(big), 1400, &passed, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK(strstr(detail, "\\x80\\x80...\" (1400 bytes) does not start with "
                         "check_expect_bytes") != NULL);
    CHECK(strlen(detail) < sizeof(detail) - 1);

    /* no check_expect_bytes: any reply passes, an empty one too */
    sp.expect_bytes = NULL;
    sp.expect_bytes_len = 0;
    CHECK_EQ_INT(hc_dgram_begin(&d, &sp, 1), 0);
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"", 0, 0, &passed, detail, sizeof(detail)));
    CHECK(passed);
    CHECK_EQ_STR(detail, "reply \"\" (0 bytes)");
    CHECK(hc_dgram_reply(&d, (const uint8_t *)"x", 1, 1, &passed, detail, sizeof(detail)));
    CHECK_EQ_STR(detail, "reply \"x\" (1 byte)");
    hc_dgram_timeout(&d, 250, detail, sizeof(detail));
    CHECK_EQ_STR(detail, "timeout: no reply in 250 ms");
}

int
main(void)
{
    test_dns();
    test_dns_ignored();
    test_udp();
    return CHECK_DONE();
}
