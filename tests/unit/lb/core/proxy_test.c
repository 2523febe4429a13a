/* Tests lb/core/proxy.c: the PROXY protocol reader on every version,
 * command and family, on each way of being wrong with the reason it
 * gives, and on every prefix of each input (0, or the whole's answer);
 * the writer byte for byte, and what it writes read back. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core.h"

#define V2SIG "\r\n\r\n\0\r\nQUIT\n"

static const enum conf_proxy accepts[] = { CONF_PROXY_V1, CONF_PROXY_V2, CONF_PROXY_ANY };

/* Every prefix of buf answers 0 or exactly what the whole does. */
static void
check_prefixes(const uint8_t *buf, size_t len, enum conf_proxy accept)
{
    struct lb_proxy_addrs whole, part;
    enum lb_proxy_bad wbad = LB_PROXY_BADS, pbad;
    int w = lb_proxy_parse(buf, len, accept, &whole, &wbad);

    for (size_t k = 0; k < len; k++) {
        int r;

        pbad = LB_PROXY_BADS;
        r = lb_proxy_parse(buf, k, accept, &part, &pbad);
        if (r == 0)
            continue;
        CHECK_EQ_INT(r, w);
        if (r == -1)
            CHECK_EQ_INT(pbad, wbad);
        else if (r > 0)
            CHECK(part.is_local == whole.is_local &&
                  memcmp(&part.src, &whole.src, sizeof(part.src)) == 0 &&
                  memcmp(&part.dst, &whole.dst, sizeof(part.dst)) == 0);
    }
}

/* Parses n bytes (with the prefixes checked); returns the answer. */
static int
parse(const void *buf, size_t n, enum conf_proxy accept, struct lb_proxy_addrs *out,
      enum lb_proxy_bad *bad)
{
    check_prefixes(buf, n, accept);
    *bad = LB_PROXY_BADS;
    memset(out, 0xa5, sizeof(*out));
    return lb_proxy_parse(buf, n, accept, out, bad);
}

static int
parse_s(const char *s, enum conf_proxy accept, struct lb_proxy_addrs *out,
        enum lb_proxy_bad *bad)
{
    return parse(s, strlen(s), accept, out, bad);
}

/* The text of a parsed address, "host:port" as lb logs it. */
static const char *
text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    return lb_net_addr_text((const struct sockaddr *)ss, buf, len);
}

static int
expect_bad_at(const void *buf, size_t n, enum conf_proxy accept, enum lb_proxy_bad why)
{
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;

    return parse(buf, n, accept, &a, &bad) == -1 && bad == why;
}

/* A macro, so that a failure names the case's line. */
#define expect_bad(buf, n, accept, why) CHECK(expect_bad_at(buf, n, accept, why))

#define expect_bad_s(s, accept, why) expect_bad(s, strlen(s), accept, why)

static void
expect_more_s(const char *s, enum conf_proxy accept)
{
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;

    CHECK_EQ_INT(parse(s, strlen(s), accept, &a, &bad), 0);
}

static void
test_v1(void)
{
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;
    char t[64];
    const char *l4 = "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\nGET /";
    const char *l6 = "PROXY TCP6 2001:db8::1 ::ffff:192.0.2.9 65535 0\r\n";
    char longest[128];

    for (size_t i = 0; i < 2; i++) {
        enum conf_proxy acc = i == 0 ? CONF_PROXY_V1 : CONF_PROXY_ANY;

        CHECK_EQ_INT(parse_s(l4, acc, &a, &bad), (int)strlen(l4) - 5);
        CHECK(!a.is_local);
        CHECK_EQ_STR(text(&a.src, t, sizeof(t)), "192.0.2.7:56324");
        CHECK_EQ_STR(text(&a.dst, t, sizeof(t)), "198.51.100.1:443");

        CHECK_EQ_INT(parse_s(l6, acc, &a, &bad), (int)strlen(l6));
        CHECK(!a.is_local);
        CHECK_EQ_STR(text(&a.src, t, sizeof(t)), "[2001:db8::1]:65535");
        CHECK_EQ_STR(text(&a.dst, t, sizeof(t)), "[::ffff:192.0.2.9]:0");

        CHECK_EQ_INT(parse_s("PROXY UNKNOWN\r\n", acc, &a, &bad), 15);
        CHECK(a.is_local);
        CHECK_EQ_INT(parse_s("PROXY UNKNOWN whatever \x01\xff 1 2\r\nx", acc, &a, &bad), 31);
        CHECK(a.is_local);
    }
    /* The spec's longest line, 107 bytes, passes; one byte more does not. */
    snprintf(longest, sizeof(longest), "PROXY UNKNOWN %s %s 65535 65535\r\n",
             "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    CHECK_EQ_INT(strlen(longest), LB_PROXY_V1_MAX);
    CHECK_EQ_INT(parse_s(longest, CONF_PROXY_V1, &a, &bad), LB_PROXY_V1_MAX);
    snprintf(longest, sizeof(longest), "PROXY UNKNOWN %s %s 65535 655350\r\n",
             "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    expect_bad_s(longest, CONF_PROXY_V1, LB_PROXY_TOO_LONG);
    /* A TCP6 line can run over too, with 45-character addresses. */
    expect_bad_s("PROXY TCP6 0000:0000:0000:0000:0000:ffff:192.168.100.200 "
                 "0000:0000:0000:0000:0000:ffff:192.168.100.200 65535 65535\r\n",
                 CONF_PROXY_ANY, LB_PROXY_TOO_LONG);
    /* Without a CR, 107 bytes of UNKNOWN wait; the 108th refuses. */
    memset(longest, 'x', sizeof(longest));
    memcpy(longest, "PROXY UNKNOWN ", 14);
    longest[LB_PROXY_V1_MAX] = '\0';
    expect_more_s(longest, CONF_PROXY_ANY);
    longest[LB_PROXY_V1_MAX] = 'x';
    longest[LB_PROXY_V1_MAX + 1] = '\0';
    expect_bad_s(longest, CONF_PROXY_ANY, LB_PROXY_TOO_LONG);
}

static void
test_v1_bad(void)
{
    static const char *const malformed[] = {
        "PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n",          /* two spaces */
        "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY TCP4\r\n",
        "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8  1 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",             /* LF only */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
        "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
        "PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",          /* inet_pton: no leading 0 */
        "PROXY TCP4 1.2.3.4.5 5.6.7.8 1 2\r\n",
        "PROXY TCP4 1234.1234.1234.1234 5.6.7.8 1 2\r\n",
        "PROXY TCP4 ::1 5.6.7.8 1 2\r\n",               /* wrong family */
        "PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
        "PROXY TCP6 ::1 ::g 1 2\r\n",
        "PROXY TCP6 ::1 ::1 65536 2\r\n",
        "PROXY TCP6 ::1 ::1 1 99999\r\n",
        "PROXY TCP6 ::1 ::1 01 2\r\n",                  /* leading zero */
        "PROXY TCP6 ::1 ::1 -1 2\r\n",
        "PROXY TCP6 ::1 ::1 +1 2\r\n",
        "PROXY TCP6 ::1 ::1 1 \r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
        "PROXY UNKNOWNX\r\n",
        "PROXY UNKNOWN\rX",
        "PROXY UNKNOWN foo\r\r\n",
        "PROXY \r\n",
    };

    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        for (size_t k = 0; k < 2; k++)
            expect_bad_s(malformed[i], k ? CONF_PROXY_ANY : CONF_PROXY_V1, LB_PROXY_MALFORMED);
    }
    /* Refused at the first wrong byte, not at a line end or the timeout. */
    expect_bad_s("PROXY TCP4 1.2.3.4x", CONF_PROXY_ANY, LB_PROXY_MALFORMED);
    expect_bad_s("PROXY X", CONF_PROXY_ANY, LB_PROXY_MALFORMED);
    expect_bad_s("PROXY TCP4 1.2.3.4 5.6.7.8 70000", CONF_PROXY_ANY, LB_PROXY_MALFORMED);
    expect_more_s("PROXY TCP4 1.2.3.4 5.6.7.8 6553", CONF_PROXY_ANY);
    expect_more_s("PROXY TCP6 ::1 ::1 1 2\r", CONF_PROXY_ANY);
}

/* A v2 header: sig, ver_cmd, fam, then body (blen bytes, its length
 * written from blen). */
static size_t
v2(uint8_t *buf, uint8_t ver_cmd, uint8_t fam, const void *body, size_t blen)
{
    memcpy(buf, V2SIG, 12);
    buf[12] = ver_cmd;
    buf[13] = fam;
    buf[14] = (uint8_t)(blen >> 8);
    buf[15] = (uint8_t)blen;
    if (blen > 0)
        memcpy(buf + 16, body, blen);
    return 16 + blen;
}

static void
test_v2(void)
{
    static const uint8_t a4[] = { 192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb,
                                  /* TLVs: NOOP, empty; UNIQUE_ID "ab" */
                                  0x04, 0, 0, 0x05, 0, 2, 'a', 'b' };
    uint8_t a6[36], unx[216 + 3] = { 0 }, buf[2048];
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;
    char t[64];
    size_t n;

    for (size_t i = 0; i < 2; i++) {
        enum conf_proxy acc = i == 0 ? CONF_PROXY_V2 : CONF_PROXY_ANY;

        n = v2(buf, 0x21, 0x11, a4, sizeof(a4));
        memcpy(buf + n, "data", 4);
        CHECK_EQ_INT(parse(buf, n + 4, acc, &a, &bad), (int)n);
        CHECK(!a.is_local);
        CHECK_EQ_STR(text(&a.src, t, sizeof(t)), "192.0.2.7:56324");
        CHECK_EQ_STR(text(&a.dst, t, sizeof(t)), "198.51.100.1:443");

        memset(a6, 0, sizeof(a6));
        inet_pton(AF_INET6, "2001:db8::7", a6);
        inet_pton(AF_INET6, "::1", a6 + 16);
        a6[32] = 0x30, a6[33] = 0x39;       /* 12345 */
        a6[34] = 0x00, a6[35] = 0x50;       /* 80 */
        n = v2(buf, 0x21, 0x21, a6, sizeof(a6));
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 52);
        CHECK(!a.is_local);
        CHECK_EQ_STR(text(&a.src, t, sizeof(t)), "[2001:db8::7]:12345");
        CHECK_EQ_STR(text(&a.dst, t, sizeof(t)), "[::1]:80");

        /* UDP, AF_UNSPEC and AF_UNIX give no client: the peer is it. */
        n = v2(buf, 0x21, 0x12, a4, 12);
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 28);
        CHECK(a.is_local);
        n = v2(buf, 0x21, 0x00, NULL, 0);
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 16);
        CHECK(a.is_local);
        n = v2(buf, 0x21, 0x00, a4 + 12, 8);          /* UNSPEC with TLVs */
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 24);
        CHECK(a.is_local);
        n = v2(buf, 0x21, 0x31, unx, 216);
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 232);
        CHECK(a.is_local);
        n = v2(buf, 0x21, 0x32, unx, sizeof(unx));    /* and a NOOP TLV */
        unx[216] = 0x04;
        n = v2(buf, 0x21, 0x32, unx, sizeof(unx));
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 235);
        CHECK(a.is_local);

        /* LOCAL: whatever the family and the block, the block is skipped. */
        n = v2(buf, 0x20, 0x00, NULL, 0);
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 16);
        CHECK(a.is_local);
        n = v2(buf, 0x20, 0x11, a4, sizeof(a4));
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), (int)n);
        CHECK(a.is_local);
        n = v2(buf, 0x20, 0x21, a4, 5);               /* short for IPv6 */
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 21);
        CHECK(a.is_local);
        n = v2(buf, 0x20, 0x31, unx, 216);
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 232);
        CHECK(a.is_local);
        n = v2(buf, 0x20, 0xff, NULL, 0);
        CHECK_EQ_INT(parse(buf, n, acc, &a, &bad), 16);
    }
    /* The largest that passes: LB_PROXY_HEADER_MAX bytes in all. */
    memset(buf + 16, 0, sizeof(buf) - 16);
    n = v2(buf, 0x21, 0x00, NULL, 0);
    buf[14] = (LB_PROXY_HEADER_MAX - 16 - 0) >> 8;
    buf[15] = (uint8_t)(LB_PROXY_HEADER_MAX - 16);
    buf[16] = 0x04;                                   /* one NOOP TLV of the rest */
    buf[17] = (LB_PROXY_HEADER_MAX - 19) >> 8;
    buf[18] = (uint8_t)(LB_PROXY_HEADER_MAX - 19);
    CHECK_EQ_INT(parse(buf, LB_PROXY_HEADER_MAX, CONF_PROXY_ANY, &a, &bad), LB_PROXY_HEADER_MAX);
    (void)n;
}

static void
test_v2_bad(void)
{
    static const uint8_t a4[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2 };
    uint8_t buf[2048] = { 0 }, body[64] = { 0 };
    size_t n;

    memcpy(body, a4, 12);
    for (size_t i = 0; i < 2; i++) {
        enum conf_proxy acc = i == 0 ? CONF_PROXY_V2 : CONF_PROXY_ANY;

        /* The version nibble is not 2: refused at that byte. */
        n = v2(buf, 0x11, 0x11, a4, 12);
        expect_bad(buf, n, acc, LB_PROXY_WRONG_VERSION);
        expect_bad(buf, 13, acc, LB_PROXY_WRONG_VERSION);
        n = v2(buf, 0x31, 0x11, a4, 12);
        expect_bad(buf, n, acc, LB_PROXY_WRONG_VERSION);
        /* A command neither LOCAL nor PROXY. */
        n = v2(buf, 0x22, 0x11, a4, 12);
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        expect_bad(buf, 13, acc, LB_PROXY_MALFORMED);
        /* A family byte the spec does not list. */
        static const uint8_t fams[] = { 0x01, 0x10, 0x13, 0x20, 0x30, 0x41, 0xff };
        for (size_t f = 0; f < sizeof(fams); f++) {
            n = v2(buf, 0x21, fams[f], a4, 12);
            expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
            expect_bad(buf, 14, acc, LB_PROXY_MALFORMED);
        }
        /* Too short for the family's addresses: refused once the length is
         * read, before the block. */
        n = v2(buf, 0x21, 0x11, a4, 11);
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        expect_bad(buf, 16, acc, LB_PROXY_MALFORMED);
        n = v2(buf, 0x21, 0x21, body, 35);
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        n = v2(buf, 0x21, 0x31, body, 35);    /* far short of 216 */
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        /* TLVs that do not parse: a short TLV head, a length past the end. */
        body[12] = 0x05;
        n = v2(buf, 0x21, 0x11, body, 14);
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        body[13] = 0, body[14] = 2, body[15] = 'a';
        n = v2(buf, 0x21, 0x11, body, 16);
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        n = v2(buf, 0x21, 0x00, body + 12, 4);
        expect_bad(buf, n, acc, LB_PROXY_MALFORMED);
        /* Over LB_PROXY_HEADER_MAX: refused at the length, for LOCAL too. */
        n = v2(buf, 0x21, 0x11, a4, 12);
        buf[14] = (LB_PROXY_HEADER_MAX - 15) >> 8;
        buf[15] = (uint8_t)(LB_PROXY_HEADER_MAX - 15);
        expect_bad(buf, 16, acc, LB_PROXY_TOO_LONG);
        expect_bad(buf, LB_PROXY_HEADER_MAX + 1, acc, LB_PROXY_TOO_LONG);
        buf[12] = 0x20;
        buf[14] = buf[15] = 0xff;
        expect_bad(buf, 16, acc, LB_PROXY_TOO_LONG);
    }
}

static void
test_signatures(void)
{
    static const char *const junk[] = {
        "GET / HTTP/1.1\r\n", "POST", "PROXy ", "PROXYTCP4", "\r\n\r\n\r\n", "\x16\x03\x01",
        "\0", "Q",
    };
    uint8_t buf[64];
    size_t n;

    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        for (size_t k = 0; k < 3; k++)
            expect_bad(junk[i], strlen(junk[i]) ? strlen(junk[i]) : 1, accepts[k],
                       LB_PROXY_NOT_PROXY);
    }
    /* Garbage is refused at its first byte, whatever is accepted. */
    for (size_t k = 0; k < 3; k++) {
        expect_bad_s("G", accepts[k], LB_PROXY_NOT_PROXY);
        expect_bad_s("PO", accepts[k], LB_PROXY_NOT_PROXY);
        expect_bad_s("\r\n\r\n\r", accepts[k], LB_PROXY_NOT_PROXY);
        /* Bytes that may still become either: wait. */
        expect_more_s("", accepts[k]);
        expect_more_s("PROX", accepts[k]);
        expect_more_s("PROXY", accepts[k]);
        expect_more_s("\r\n\r\n", accepts[k]);
    }
    /* The other version's signature, whole. */
    expect_bad_s("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n", CONF_PROXY_V2, LB_PROXY_WRONG_VERSION);
    expect_bad_s("PROXY ", CONF_PROXY_V2, LB_PROXY_WRONG_VERSION);
    expect_bad_s("PROXY garbage", CONF_PROXY_V2, LB_PROXY_WRONG_VERSION);
    n = v2(buf, 0x21, 0x00, NULL, 0);
    expect_bad(buf, n, CONF_PROXY_V1, LB_PROXY_WRONG_VERSION);
    expect_bad(buf, 12, CONF_PROXY_V1, LB_PROXY_WRONG_VERSION);
    expect_more_s("\r\n\r\n\0\r\nQUIT", CONF_PROXY_V1);
}

/* Every split of a header into two reads gives the whole's answer: the
 * prefix rule, as a session reads it (buffer grows, parse again). */
static void
test_split(void)
{
    const char *s = "PROXY TCP4 10.1.2.3 10.0.0.1 4000 80\r\nhello";
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;
    size_t whole = strlen(s) - 5;

    for (size_t cut = 0; cut <= strlen(s); cut++) {
        int r = lb_proxy_parse((const uint8_t *)s, cut, CONF_PROXY_ANY, &a, &bad);

        CHECK_EQ_INT(r, cut < whole ? 0 : (int)whole);
    }
}

static void
sin4(struct sockaddr_in *s, const char *ip, uint16_t port)
{
    memset(s, 0, sizeof(*s));
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    inet_pton(AF_INET, ip, &s->sin_addr);
}

static void
sin6(struct sockaddr_in6 *s, const char *ip, uint16_t port)
{
    memset(s, 0, sizeof(*s));
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    inet_pton(AF_INET6, ip, &s->sin6_addr);
}

/* Builds, checks the bytes, and reads them back. */
static void
expect_build(enum conf_proxy v, const void *src, const void *dst,
             const struct lb_proxy_tlvs *tlvs, const void *want, size_t want_len,
             const char *src_text, const char *dst_text)
{
    uint8_t buf[LB_PROXY_BUILD_MAX];
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;
    char t[64];
    size_t n = lb_proxy_build(buf, v, src, dst, tlvs);

    CHECK_EQ_INT(n, want_len);
    CHECK(n == want_len && memcmp(buf, want, n) == 0);
    CHECK_EQ_INT(parse(buf, n, v, &a, &bad), (int)n);
    CHECK_EQ_INT(a.is_local, src_text == NULL);
    if (src_text != NULL) {
        CHECK_EQ_STR(text(&a.src, t, sizeof(t)), src_text);
        CHECK_EQ_STR(text(&a.dst, t, sizeof(t)), dst_text);
    }
}

static void
test_build(void)
{
    struct sockaddr_in c4, s4;
    struct sockaddr_in6 c6, s6;
    struct sockaddr_storage unx = { .ss_family = AF_UNIX };
    struct lb_proxy_tlvs tlvs = { .unique_id = "0000000000000007", .authority = "example.com" };
    char id[200];
    uint8_t buf[LB_PROXY_BUILD_MAX];

    sin4(&c4, "192.0.2.7", 56324);
    sin4(&s4, "10.0.0.1", 8080);
    sin6(&c6, "2001:db8::7", 12345);
    sin6(&s6, "::1", 80);

    static const char l4[] = "PROXY TCP4 192.0.2.7 10.0.0.1 56324 8080\r\n";
    expect_build(CONF_PROXY_V1, &c4, &s4, &tlvs, l4, sizeof(l4) - 1, "192.0.2.7:56324",
                 "10.0.0.1:8080");
    static const char l6[] = "PROXY TCP6 2001:db8::7 ::1 12345 80\r\n";
    expect_build(CONF_PROXY_V1, &c6, &s6, NULL, l6, sizeof(l6) - 1, "[2001:db8::7]:12345",
                 "[::1]:80");
    static const char lm[] = "PROXY TCP6 ::ffff:192.0.2.7 ::1 56324 80\r\n";
    expect_build(CONF_PROXY_V1, &c4, &s6, NULL, lm, sizeof(lm) - 1, "[::ffff:192.0.2.7]:56324",
                 "[::1]:80");
    expect_build(CONF_PROXY_V1, NULL, NULL, NULL, "PROXY UNKNOWN\r\n", 15, NULL, NULL);
    expect_build(CONF_PROXY_V1, &unx, &s4, NULL, "PROXY UNKNOWN\r\n", 15, NULL, NULL);

    static const uint8_t b4[] = {
        0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
        0x21, 0x11, 0x00, 12 + 14 + 19,
        192, 0, 2, 7, 10, 0, 0, 1, 0xdc, 0x04, 0x1f, 0x90,
        0x02, 0x00, 11, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm',
        0x05, 0x00, 16, '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0',
        '0', '7',
    };
    expect_build(CONF_PROXY_V2, &c4, &s4, &tlvs, b4, sizeof(b4), "192.0.2.7:56324",
                 "10.0.0.1:8080");
    static const uint8_t b6[] = {
        0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
        0x21, 0x21, 0x00, 36,
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        0x30, 0x39, 0x00, 0x50,
    };
    expect_build(CONF_PROXY_V2, &c6, &s6, NULL, b6, sizeof(b6), "[2001:db8::7]:12345",
                 "[::1]:80");
    /* Two families: both IPv6, the IPv4 one mapped. */
    static const uint8_t bm[] = {
        0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
        0x21, 0x21, 0x00, 36,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        0xdc, 0x04, 0x00, 0x50,
    };
    expect_build(CONF_PROXY_V2, &c4, &s6, &(struct lb_proxy_tlvs){ "", NULL }, bm, sizeof(bm),
                 "[::ffff:192.0.2.7]:56324", "[::1]:80");
    static const uint8_t local[] = {
        0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
        0x20, 0x00, 0x00, 0x00,
    };
    expect_build(CONF_PROXY_V2, NULL, NULL, NULL, local, sizeof(local), NULL, NULL);
    expect_build(CONF_PROXY_V2, &s4, &unx, NULL, local, sizeof(local), NULL, NULL);

    /* A unique id over the spec's 128 bytes is left out, not cut. */
    memset(id, 'i', sizeof(id));
    id[128] = '\0';
    CHECK_EQ_INT(lb_proxy_build(buf, CONF_PROXY_V2, NULL, NULL,
                                &(struct lb_proxy_tlvs){ .unique_id = id }), 16 + 131);
    id[129] = '\0';
    id[128] = 'i';
    CHECK_EQ_INT(lb_proxy_build(buf, CONF_PROXY_V2, NULL, NULL,
                                &(struct lb_proxy_tlvs){ .unique_id = id }), 16);
    /* Both at their longest fit LB_PROXY_BUILD_MAX, and read back. */
    {
        char host[256];
        struct lb_proxy_addrs a;
        enum lb_proxy_bad bad;
        size_t n;

        memset(host, 'h', 255);
        host[255] = '\0';
        id[128] = '\0';
        n = lb_proxy_build(buf, CONF_PROXY_V2, (struct sockaddr *)&c6, (struct sockaddr *)&s6,
                           &(struct lb_proxy_tlvs){ .unique_id = id, .authority = host });
        CHECK_EQ_INT(n, 16 + 36 + 3 + 255 + 3 + 128);
        CHECK_EQ_INT(parse(buf, n, CONF_PROXY_ANY, &a, &bad), (int)n);
    }
    CHECK_EQ_INT(lb_proxy_build(buf, CONF_PROXY_OFF, NULL, NULL, NULL), 0);
}

static void
test_names(void)
{
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_NOT_PROXY), "not_proxy");
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_MALFORMED), "malformed");
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_WRONG_VERSION), "wrong_version");
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_TOO_LONG), "too_long");
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_TIMEOUT), "timeout");
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_CLOSED), "closed");
    CHECK_EQ_STR(lb_proxy_bad_name(LB_PROXY_BADS), "unknown");
}

int
main(void)
{
    test_v1();
    test_v1_bad();
    test_v2();
    test_v2_bad();
    test_signatures();
    test_split();
    test_build();
    test_names();
    return CHECK_DONE();
}
