/*
 * fuzz_proxy.c - the PROXY protocol reader (lb/core/proxy.c), as a
 * frontend with accept_proxy meets it: bytes from anyone, in any number of
 * reads.
 *
 * For each accept mode (v1, v2, any) the input is read whole, then every
 * prefix of it: each prefix must answer 0 or exactly the whole's answer
 * (its length and addresses, or -1 with the same reason), since a session
 * parses again after each read and must not decide differently because the
 * header came in pieces. A header never runs past the input or its caps,
 * and a refusal's reason is one the parser may give. Then the writer:
 * addresses, ports and TLV values taken from the input are built as v1 and
 * v2 and read back to the same addresses.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "core.h"
#include "fuzz.h"

/* Bytes past this never matter: no header is longer. */
#define FUZZ_PROXY_SCAN (LB_PROXY_HEADER_MAX + 1)

static bool
fuzz_same_addrs(const struct lb_proxy_addrs *a, const struct lb_proxy_addrs *b)
{
    return a->is_local == b->is_local && memcmp(&a->src, &b->src, sizeof(a->src)) == 0 &&
           memcmp(&a->dst, &b->dst, sizeof(a->dst)) == 0;
}

static void
fuzz_check_header(const uint8_t *data, int rc, size_t size, const struct lb_proxy_addrs *a,
                  enum lb_proxy_bad bad)
{
    FUZZ_CHECK(rc >= -1 && rc <= (int)size);
    if (rc == -1) {
        FUZZ_CHECK(bad == LB_PROXY_NOT_PROXY || bad == LB_PROXY_MALFORMED ||
                   bad == LB_PROXY_WRONG_VERSION || bad == LB_PROXY_TOO_LONG);
        FUZZ_CHECK(strcmp(lb_proxy_bad_name(bad), "unknown") != 0);
        return;
    }
    if (rc == 0)
        return;
    FUZZ_CHECK(rc <= LB_PROXY_HEADER_MAX);
    if (data[0] == 'P')
        FUZZ_CHECK(rc <= LB_PROXY_V1_MAX && data[rc - 2] == '\r' && data[rc - 1] == '\n');
    else
        FUZZ_CHECK(rc >= 16);
    if (!a->is_local) {
        FUZZ_CHECK(a->src.ss_family == AF_INET || a->src.ss_family == AF_INET6);
        FUZZ_CHECK(a->dst.ss_family == a->src.ss_family);
    }
}

static void
fuzz_parse(const uint8_t *data, size_t size, enum conf_proxy accept)
{
    struct lb_proxy_addrs whole, part;
    enum lb_proxy_bad wbad = LB_PROXY_BADS, pbad;
    int w = lb_proxy_parse(data, size, accept, &whole, &wbad);

    fuzz_check_header(data, w, size, &whole, wbad);
    for (size_t k = 0; k < size && k <= FUZZ_PROXY_SCAN; k++) {
        int r;

        pbad = LB_PROXY_BADS;
        r = lb_proxy_parse(data, k, accept, &part, &pbad);
        if (r == 0)
            continue;
        FUZZ_CHECK(r == w);
        FUZZ_CHECK(r != -1 || pbad == wbad);
        FUZZ_CHECK(r == -1 || fuzz_same_addrs(&part, &whole));
    }
}

/* An address of the family the input picks, from its bytes. */
static void
fuzz_addr(struct sockaddr_storage *ss, bool is_v6, const uint8_t *ip, const uint8_t *port)
{
    memset(ss, 0, sizeof(*ss));
    if (is_v6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;

        s->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, ip, 16);
        memcpy(&s->sin6_port, port, 2);
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;

        s->sin_family = AF_INET;
        memcpy(&s->sin_addr, ip, 4);
        memcpy(&s->sin_port, port, 2);
    }
}

/* What the header must carry for ss when the other end's family is
 * is_v6 too: ss itself, or IPv4-mapped IPv6. */
static void
fuzz_expected(struct sockaddr_storage *out, const struct sockaddr_storage *ss, bool any_v6)
{
    *out = *ss;
    if (ss->ss_family == AF_INET && any_v6) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;

        memset(out, 0, sizeof(*out));
        v6->sin6_family = AF_INET6;
        v6->sin6_port = v4->sin_port;
        v6->sin6_addr.s6_addr[10] = v6->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&v6->sin6_addr.s6_addr[12], &v4->sin_addr, 4);
    }
}

/* A C string of at most max bytes from the input, cut at a NUL. */
static void
fuzz_value(char *dst, size_t max, const uint8_t *data, size_t size, size_t *off)
{
    size_t n = 0;

    while (*off < size && n < max && data[*off] != '\0')
        dst[n++] = (char)data[(*off)++];
    dst[n] = '\0';
    if (*off < size)
        (*off)++;
}

static void
fuzz_round_trip(const uint8_t *data, size_t size)
{
    uint8_t raw[37] = { 0 }, buf[LB_PROXY_BUILD_MAX];
    struct sockaddr_storage src, dst, want_src, want_dst;
    struct lb_proxy_addrs a;
    enum lb_proxy_bad bad;
    char id[200], host[300];
    size_t off = 0;

    memcpy(raw, data, size < sizeof(raw) ? size : sizeof(raw));
    off = size < sizeof(raw) ? size : sizeof(raw);
    fuzz_addr(&src, raw[0] & 1, raw + 1, raw + 33);
    fuzz_addr(&dst, raw[0] & 2, raw + 17, raw + 35);
    fuzz_expected(&want_src, &src, (raw[0] & 3) != 0);
    fuzz_expected(&want_dst, &dst, (raw[0] & 3) != 0);
    /* Values up to past the caps, so that leaving one out is tried too. */
    fuzz_value(id, 150, data, size, &off);
    fuzz_value(host, 280, data, size, &off);

    for (enum conf_proxy v = CONF_PROXY_V1; v <= CONF_PROXY_V2; v++) {
        struct lb_proxy_tlvs tlvs = { .unique_id = id, .authority = host };
        size_t n = lb_proxy_build(buf, v, (struct sockaddr *)&src, (struct sockaddr *)&dst,
                                  &tlvs);

        FUZZ_CHECK(n > 0 && n <= LB_PROXY_BUILD_MAX);
        FUZZ_CHECK(lb_proxy_parse(buf, n, v, &a, &bad) == (int)n);
        FUZZ_CHECK(!a.is_local);
        FUZZ_CHECK(memcmp(&a.src, &want_src, sizeof(a.src)) == 0);
        FUZZ_CHECK(memcmp(&a.dst, &want_dst, sizeof(a.dst)) == 0);
        fuzz_parse(buf, n, v);
        /* A health check's header: LOCAL, UNKNOWN. */
        n = lb_proxy_build(buf, v, NULL, NULL, &tlvs);
        FUZZ_CHECK(lb_proxy_parse(buf, n, CONF_PROXY_ANY, &a, &bad) == (int)n && a.is_local);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum conf_proxy accepts[] = { CONF_PROXY_V1, CONF_PROXY_V2, CONF_PROXY_ANY };

    for (size_t i = 0; i < sizeof(accepts) / sizeof(accepts[0]); i++)
        fuzz_parse(data, size, accepts[i]);
    fuzz_round_trip(data, size);
    return 0;
}
