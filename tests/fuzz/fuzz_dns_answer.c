/*
 * fuzz_dns_answer.c - what a dns or udp check does with a datagram that
 * comes back (hc_dns_match, hc_dgram_reply): anyone who can send to the
 * probe's port may send anything.
 *
 * The input is the datagram. For the dns check (the query of example.test
 * SOA, id 0x1d2c, as the probe sends it) the match is compared with a
 * reference written from dgram.h's rules: a header, the id, QR, one
 * question, the same name in any case with the same type and class; the
 * verdict must come exactly for an answer, pass exactly for the rcodes
 * asked, and never when the datagram was not the answer. For the udp check
 * (check_expect_bytes "PONG") it passes exactly on that prefix. Either
 * detail must be printable ASCII within HC_DETAIL_MAX: it goes into log
 * lines and /stats. Every datagram is also given cut to the prober's
 * HC_DGRAM_IN_MAX bytes, as recv(2) would cut it.
 */
#include "dgram.h"
#include "fuzz.h"

#define FUZZ_RCODES (1u << 0 | 1u << 3)    /* NOERROR, NXDOMAIN */

static int
fold(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static enum hc_dns_match
ref_match(const uint8_t *q, size_t qlen, const uint8_t *m, size_t len)
{
    if (len < 12)
        return HC_DNS_SHORT;
    if (m[0] != q[0] || m[1] != q[1])
        return HC_DNS_WRONG_ID;
    if (!(m[2] & 0x80))
        return HC_DNS_NOT_RESPONSE;
    if (m[4] != 0 || m[5] != 1 || len < qlen)
        return HC_DNS_QUESTION_MISMATCH;
    for (size_t i = 12; i < qlen; i++) {
        if (i < qlen - 4 ? fold(m[i]) != fold(q[i]) : m[i] != q[i])
            return HC_DNS_QUESTION_MISMATCH;
    }
    return HC_DNS_ANSWER;
}

static void
check_detail(const char *detail)
{
    size_t n = strnlen(detail, HC_DETAIL_MAX);

    FUZZ_CHECK(n > 0 && n < HC_DETAIL_MAX);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(detail[i] >= 0x20 && detail[i] < 0x7f);
}

static void
fuzz_dns(const uint8_t *data, size_t n, size_t len)
{
    struct hc_spec sp = { .kind = CONF_CHECK_DNS, .dns_name = "example.test", .dns_type = 6,
                          .dns_rcodes = FUZZ_RCODES };
    enum hc_dns_match want;
    char detail[HC_DETAIL_MAX];
    struct hc_dgram d;
    unsigned answers = 0;
    int rcode = -1;
    bool passed;

    FUZZ_CHECK(hc_dgram_begin(&d, &sp, 0x1d2c) == 0);
    want = ref_match(d.out, d.out_len, data, n);
    FUZZ_CHECK(hc_dns_match(d.out, d.out_len, data, n, &rcode, &answers) == want);
    if (want == HC_DNS_ANSWER) {
        FUZZ_CHECK(rcode == (data[3] & 0xf));
        FUZZ_CHECK(answers == (unsigned)(data[6] << 8 | data[7]));
    }
    detail[0] = '\0';
    if (!hc_dgram_reply(&d, data, n, len, &passed, detail, sizeof(detail))) {
        FUZZ_CHECK(want != HC_DNS_ANSWER && d.ignored == 1 && d.last_ignored == want);
        FUZZ_CHECK(detail[0] == '\0');
        hc_dgram_timeout(&d, 1000, detail, sizeof(detail));
        check_detail(detail);
        return;
    }
    FUZZ_CHECK(want == HC_DNS_ANSWER && d.ignored == 0);
    FUZZ_CHECK(passed == (((FUZZ_RCODES >> (data[3] & 0xf)) & 1) != 0));
    check_detail(detail);
}

static void
fuzz_udp(const uint8_t *data, size_t n, size_t len)
{
    struct hc_spec sp = { .kind = CONF_CHECK_UDP, .send = (const uint8_t *)"PING", .send_len = 4,
                          .expect_bytes = (const uint8_t *)"PONG", .expect_bytes_len = 4 };
    char detail[HC_DETAIL_MAX];
    struct hc_dgram d;
    bool passed;

    FUZZ_CHECK(hc_dgram_begin(&d, &sp, 0) == 0);
    FUZZ_CHECK(hc_dgram_reply(&d, data, n, len, &passed, detail, sizeof(detail)));
    FUZZ_CHECK(passed == (n >= 4 && memcmp(data, "PONG", 4) == 0));
    check_detail(detail);
    /* the verdict's words are never cut off by the reply shown */
    FUZZ_CHECK(passed || strstr(detail, " does not start with check_expect_bytes") != NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cut = size < HC_DGRAM_IN_MAX ? size : HC_DGRAM_IN_MAX;

    fuzz_dns(data, cut, size);
    fuzz_udp(data, cut, size);
    return 0;
}
