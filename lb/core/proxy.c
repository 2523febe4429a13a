/*
 * proxy.c - the PROXY protocol (HAProxy's doc/proxy-protocol.txt), v1 and
 * v2: the reader of the header a balancer in front sends lb, and the writer
 * of the header lb sends a server.
 *
 * The reader is a left-to-right scan that decides at the first byte where
 * the answer is known, from the bytes before it and that byte only: fed
 * any prefix of an input it answers 0 (need more) or exactly what it
 * answers for the whole. A header split over many reads is then read the
 * same as in one, and garbage is refused at its first wrong byte instead of
 * waiting for the timeout. tests/fuzz/fuzz_proxy.c checks this.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "lb_enum.h"

/* v2: the signature, then ver_cmd, fam and a 16-bit length of what
 * follows (addresses, then TLVs). */
static const uint8_t lb_proxy_v2_sig[12] = {
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
};
#define LB_PROXY_V2_HEAD 16
#define LB_PROXY_V2_VERSION 0x2
#define LB_PROXY_V2_LOCAL 0x0
#define LB_PROXY_V2_PROXY 0x1
/* fam: address family in the high nibble, transport in the low one. */
#define LB_PROXY_V2_UNSPEC 0x00
#define LB_PROXY_V2_TCP4 0x11
#define LB_PROXY_V2_UDP4 0x12
#define LB_PROXY_V2_TCP6 0x21
#define LB_PROXY_V2_UDP6 0x22
#define LB_PROXY_V2_UNIX_STREAM 0x31
#define LB_PROXY_V2_UNIX_DGRAM 0x32
/* The address blocks' sizes, by family. */
#define LB_PROXY_V2_LEN_INET 12
#define LB_PROXY_V2_LEN_INET6 36
#define LB_PROXY_V2_LEN_UNIX 216
/* The TLVs lb writes. */
#define LB_PROXY_PP2_TYPE_AUTHORITY 0x02
#define LB_PROXY_PP2_TYPE_UNIQUE_ID 0x05
#define LB_PROXY_UNIQUE_ID_MAX 128      /* the spec's cap */
#define LB_PROXY_AUTHORITY_MAX 255      /* a DNS name's */

/* v1: "PROXY " and the fields of the line, in order. */
static const char lb_proxy_v1_sig[] = "PROXY ";
#define LB_PROXY_V1_SIG_LEN 6

enum lb_proxy_v1_field {
    LB_PROXY_V1_PROTO = 0,          /* TCP4, TCP6 or UNKNOWN */
    LB_PROXY_V1_SRC,
    LB_PROXY_V1_DST,
    LB_PROXY_V1_SPORT,
    LB_PROXY_V1_DPORT,
    LB_PROXY_V1_REST,               /* UNKNOWN: anything up to the CR */
    LB_PROXY_V1_LF,                 /* the CR came: the LF must follow */
};

static const char *const lb_proxy_bad_names[] = {
    [LB_PROXY_NOT_PROXY] = "not_proxy",
    [LB_PROXY_MALFORMED] = "malformed",
    [LB_PROXY_WRONG_VERSION] = "wrong_version",
    [LB_PROXY_TOO_LONG] = "too_long",
    [LB_PROXY_TIMEOUT] = "timeout",
    [LB_PROXY_CLOSED] = "closed",
};

LB_ENUM_NAME(lb_proxy_bad_name, enum lb_proxy_bad, lb_proxy_bad_names, "unknown")

static int
lb_proxy_refuse(enum lb_proxy_bad *bad, enum lb_proxy_bad why)
{
    *bad = why;
    return -1;
}

/* ------------------------------------------------------------ reading v1 */

/* Whether the n bytes of tok begin one of v1's protocol words. */
static bool
lb_proxy_v1_proto_prefix(const uint8_t *tok, size_t n)
{
    static const char *const words[] = { "TCP4", "TCP6", "UNKNOWN" };

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (n <= strlen(words[i]) && memcmp(tok, words[i], n) == 0)
            return true;
    }
    return false;
}

static bool
lb_proxy_v1_is_word(const uint8_t *tok, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(tok, word, n) == 0;
}

/* A byte an address of family may hold in its text: IPv4 is dotted
 * decimal; IPv6 is hex and colons, and dots for its IPv4-mapped and
 * -compatible forms ("::ffff:192.0.2.7"). inet_pton judges the whole. */
static bool
lb_proxy_v1_addr_char(int family, uint8_t c)
{
    if ((c >= '0' && c <= '9') || c == '.')
        return true;
    return family == AF_INET6 &&
           (c == ':' || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
}

/* The address text tok (n bytes, at most INET6_ADDRSTRLEN - 1) into sa,
 * port 0 for now. -1 when inet_pton refuses it. */
static int
lb_proxy_v1_addr(const uint8_t *tok, size_t n, int family, struct sockaddr_storage *sa)
{
    char text[INET6_ADDRSTRLEN];

    memcpy(text, tok, n);
    text[n] = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->ss_family = (sa_family_t)family;
    if (family == AF_INET)
        return inet_pton(AF_INET, text, &((struct sockaddr_in *)sa)->sin_addr) == 1 ? 0 : -1;
    return inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)sa)->sin6_addr) == 1 ? 0 : -1;
}

static void
lb_proxy_set_port(struct sockaddr_storage *sa, uint16_t port)
{
    if (sa->ss_family == AF_INET)
        ((struct sockaddr_in *)sa)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

/* The line after "PROXY ", one byte at a time: every field is judged at
 * the byte that ends it, or at the first byte it may not hold (a letter in
 * a port, a 16th character in an IPv4 address, a second space), so that
 * the answer never waits for bytes it does not need. Single spaces only,
 * addresses of the family the protocol word names, ports in decimal
 * without a leading zero (0..65535), CRLF at the end; UNKNOWN takes
 * anything up to its CR. Past LB_PROXY_V1_MAX bytes without the LF is
 * TOO_LONG. */
static int
lb_proxy_parse_v1(const uint8_t *buf, size_t len, struct lb_proxy_addrs *out,
                  enum lb_proxy_bad *bad)
{
    enum lb_proxy_v1_field field = LB_PROXY_V1_PROTO;
    size_t start = LB_PROXY_V1_SIG_LEN;     /* of the current field */
    int family = AF_UNSPEC;
    uint32_t port = 0;

    for (size_t i = LB_PROXY_V1_SIG_LEN;; i++) {
        const uint8_t *tok = buf + start;
        size_t n = i - start;               /* the field's bytes before i */
        uint8_t c;

        if (i == len)
            return 0;
        if (i >= LB_PROXY_V1_MAX)
            return lb_proxy_refuse(bad, LB_PROXY_TOO_LONG);
        c = buf[i];
        switch (field) {
        case LB_PROXY_V1_PROTO:
            if (c == ' ' || c == '\r') {
                if (lb_proxy_v1_is_word(tok, n, "UNKNOWN")) {
                    field = c == ' ' ? LB_PROXY_V1_REST : LB_PROXY_V1_LF;
                } else if (c == ' ' && lb_proxy_v1_is_word(tok, n, "TCP4")) {
                    family = AF_INET;
                    field = LB_PROXY_V1_SRC;
                } else if (c == ' ' && lb_proxy_v1_is_word(tok, n, "TCP6")) {
                    family = AF_INET6;
                    field = LB_PROXY_V1_SRC;
                } else {
                    return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
                }
                start = i + 1;
            } else if (!lb_proxy_v1_proto_prefix(tok, n + 1)) {
                return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
            }
            break;

        case LB_PROXY_V1_SRC:
        case LB_PROXY_V1_DST:
            if (c == ' ') {
                if (n == 0 || lb_proxy_v1_addr(tok, n, family, field == LB_PROXY_V1_SRC
                                                                   ? &out->src : &out->dst) == -1)
                    return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
                field++;
                start = i + 1;
                port = 0;
            } else if (!lb_proxy_v1_addr_char(family, c) ||
                       n + 1 > (family == AF_INET ? INET_ADDRSTRLEN : INET6_ADDRSTRLEN) - 1) {
                return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
            }
            break;

        case LB_PROXY_V1_SPORT:
        case LB_PROXY_V1_DPORT:
            if (c == (field == LB_PROXY_V1_SPORT ? ' ' : '\r')) {
                if (n == 0)
                    return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
                lb_proxy_set_port(field == LB_PROXY_V1_SPORT ? &out->src : &out->dst,
                                  (uint16_t)port);
                field = field == LB_PROXY_V1_SPORT ? LB_PROXY_V1_DPORT : LB_PROXY_V1_LF;
                start = i + 1;
                port = 0;
            } else if (c < '0' || c > '9' || (n == 1 && tok[0] == '0')) {
                return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
            } else {
                port = port * 10 + (uint32_t)(c - '0');
                if (port > 65535)
                    return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
            }
            break;

        case LB_PROXY_V1_REST:
            if (c == '\r')
                field = LB_PROXY_V1_LF;
            break;

        case LB_PROXY_V1_LF:
            if (c != '\n')
                return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
            out->is_local = family == AF_UNSPEC;
            if (out->is_local) {
                memset(&out->src, 0, sizeof(out->src));
                memset(&out->dst, 0, sizeof(out->dst));
            }
            return (int)(i + 1);
        }
    }
}

/* ------------------------------------------------------------ reading v2 */

static uint16_t
lb_proxy_be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* The address block's size for a fam byte under the PROXY command, and
 * whether lb takes the client from it (TCP over IPv4 or IPv6: lb relays
 * TCP, and a UDP or unix address is not this connection's client). -1 for
 * a byte the spec does not list, which it says receivers must refuse. */
static int
lb_proxy_v2_addr_len(uint8_t fam, bool *takes)
{
    *takes = fam == LB_PROXY_V2_TCP4 || fam == LB_PROXY_V2_TCP6;
    switch (fam) {
    case LB_PROXY_V2_UNSPEC:
        return 0;
    case LB_PROXY_V2_TCP4:
    case LB_PROXY_V2_UDP4:
        return LB_PROXY_V2_LEN_INET;
    case LB_PROXY_V2_TCP6:
    case LB_PROXY_V2_UDP6:
        return LB_PROXY_V2_LEN_INET6;
    case LB_PROXY_V2_UNIX_STREAM:
    case LB_PROXY_V2_UNIX_DGRAM:
        return LB_PROXY_V2_LEN_UNIX;
    default:
        return -1;
    }
}

/* The TLVs in buf[off..end): each a type, a 16-bit length and that many
 * bytes, the last ending at end. Their values are not used (lb takes
 * only the addresses), but a header whose TLVs do not parse is not one. */
static bool
lb_proxy_v2_tlvs_ok(const uint8_t *buf, size_t off, size_t end)
{
    while (off < end) {
        if (end - off < 3)
            return false;
        off += 3 + (size_t)lb_proxy_be16(buf + off + 1);
        if (off > end)
            return false;
    }
    return true;
}

static void
lb_proxy_v2_take(const uint8_t *a, uint8_t fam, struct lb_proxy_addrs *out)
{
    memset(&out->src, 0, sizeof(out->src));
    memset(&out->dst, 0, sizeof(out->dst));
    if (fam == LB_PROXY_V2_TCP4) {
        struct sockaddr_in *s = (struct sockaddr_in *)&out->src;
        struct sockaddr_in *d = (struct sockaddr_in *)&out->dst;

        s->sin_family = d->sin_family = AF_INET;
        memcpy(&s->sin_addr, a, 4);
        memcpy(&d->sin_addr, a + 4, 4);
        memcpy(&s->sin_port, a + 8, 2);     /* both in network order */
        memcpy(&d->sin_port, a + 10, 2);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&out->src;
        struct sockaddr_in6 *d = (struct sockaddr_in6 *)&out->dst;

        s->sin6_family = d->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, a, 16);
        memcpy(&d->sin6_addr, a + 16, 16);
        memcpy(&s->sin6_port, a + 32, 2);
        memcpy(&d->sin6_port, a + 34, 2);
    }
}

/* After the signature: the version (else WRONG_VERSION), the command
 * (LOCAL or PROXY, else MALFORMED), the family (PROXY: one the spec lists,
 * else MALFORMED), the length (the whole over LB_PROXY_HEADER_MAX:
 * TOO_LONG; PROXY: shorter than the family's addresses: MALFORMED), each
 * judged at its own byte; then, once the whole header came, the TLVs
 * (PROXY). LOCAL's block is skipped unread: the spec says the receiver
 * discards it, family included. */
static int
lb_proxy_parse_v2(const uint8_t *buf, size_t len, struct lb_proxy_addrs *out,
                  enum lb_proxy_bad *bad)
{
    uint8_t cmd, fam = 0;
    size_t total;
    bool takes = false;
    int alen = 0;

    if (len < 13)
        return 0;
    if (buf[12] >> 4 != LB_PROXY_V2_VERSION)
        return lb_proxy_refuse(bad, LB_PROXY_WRONG_VERSION);
    cmd = buf[12] & 0x0f;
    if (cmd != LB_PROXY_V2_LOCAL && cmd != LB_PROXY_V2_PROXY)
        return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
    if (len < 14)
        return 0;
    if (cmd == LB_PROXY_V2_PROXY) {
        fam = buf[13];
        alen = lb_proxy_v2_addr_len(fam, &takes);
        if (alen == -1)
            return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
    }
    if (len < LB_PROXY_V2_HEAD)
        return 0;
    total = LB_PROXY_V2_HEAD + (size_t)lb_proxy_be16(buf + 14);
    if (total > LB_PROXY_HEADER_MAX)
        return lb_proxy_refuse(bad, LB_PROXY_TOO_LONG);
    if (total < LB_PROXY_V2_HEAD + (size_t)alen)
        return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
    if (len < total)
        return 0;
    if (cmd == LB_PROXY_V2_PROXY &&
        !lb_proxy_v2_tlvs_ok(buf, LB_PROXY_V2_HEAD + (size_t)alen, total))
        return lb_proxy_refuse(bad, LB_PROXY_MALFORMED);
    out->is_local = !takes;
    if (takes) {
        lb_proxy_v2_take(buf + LB_PROXY_V2_HEAD, fam, out);
    } else {
        memset(&out->src, 0, sizeof(out->src));
        memset(&out->dst, 0, sizeof(out->dst));
    }
    return (int)total;
}

/* Which signature the bytes so far begin: v1's starts with 'P', v2's with
 * CR, so the first byte tells. Whether the version is accepted is judged
 * when its whole signature came, not before: "POST" and "PROXY " both
 * begin with 'P', and are refused for different reasons. accept V1 takes
 * only v1, V2 only v2, anything else (ANY) both. */
int
lb_proxy_parse(const uint8_t *buf, size_t len, enum conf_proxy accept,
               struct lb_proxy_addrs *out, enum lb_proxy_bad *bad)
{
    struct lb_proxy_addrs got;      /* *out is written only on success */
    const uint8_t *sig;
    size_t siglen, n;
    bool is_v1;
    int rc;

    if (len == 0)
        return 0;
    is_v1 = buf[0] == (uint8_t)lb_proxy_v1_sig[0];
    sig = is_v1 ? (const uint8_t *)lb_proxy_v1_sig : lb_proxy_v2_sig;
    siglen = is_v1 ? LB_PROXY_V1_SIG_LEN : sizeof(lb_proxy_v2_sig);
    n = len < siglen ? len : siglen;
    if (memcmp(buf, sig, n) != 0)
        return lb_proxy_refuse(bad, LB_PROXY_NOT_PROXY);
    if (len < siglen)
        return 0;
    if (accept == (is_v1 ? CONF_PROXY_V2 : CONF_PROXY_V1))
        return lb_proxy_refuse(bad, LB_PROXY_WRONG_VERSION);
    rc = is_v1 ? lb_proxy_parse_v1(buf, len, &got, bad) : lb_proxy_parse_v2(buf, len, &got, bad);
    if (rc > 0)
        *out = got;
    return rc;
}

/* --------------------------------------------------------------- writing */

/* src and dst as one family: as they are when they share one, both IPv6
 * (IPv4-mapped) when one is IPv4 and the other IPv6. false when a family
 * is neither. */
static bool
lb_proxy_same_family(const struct sockaddr *src, const struct sockaddr *dst,
                     struct sockaddr_storage *s, struct sockaddr_storage *d)
{
    const struct sockaddr *in[2] = { src, dst };
    struct sockaddr_storage *o[2] = { s, d };
    bool any6 = src->sa_family == AF_INET6 || dst->sa_family == AF_INET6;

    for (int i = 0; i < 2; i++) {
        memset(o[i], 0, sizeof(*o[i]));
        if (in[i]->sa_family == AF_INET && any6) {
            const struct sockaddr_in *v4 = (const struct sockaddr_in *)in[i];
            struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)o[i];

            v6->sin6_family = AF_INET6;
            v6->sin6_port = v4->sin_port;
            v6->sin6_addr.s6_addr[10] = 0xff;
            v6->sin6_addr.s6_addr[11] = 0xff;
            memcpy(&v6->sin6_addr.s6_addr[12], &v4->sin_addr, 4);
        } else if (in[i]->sa_family == AF_INET) {
            memcpy(o[i], in[i], sizeof(struct sockaddr_in));
        } else if (in[i]->sa_family == AF_INET6) {
            memcpy(o[i], in[i], sizeof(struct sockaddr_in6));
        } else {
            return false;
        }
    }
    return true;
}

static size_t
lb_proxy_build_v1(uint8_t *buf, const struct sockaddr_storage *s,
                  const struct sockaddr_storage *d)
{
    char sa[INET6_ADDRSTRLEN], da[INET6_ADDRSTRLEN];
    int n;

    if (s == NULL) {
        memcpy(buf, "PROXY UNKNOWN\r\n", 15);
        return 15;
    }
    if (s->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)s;
        const struct sockaddr_in *b = (const struct sockaddr_in *)d;

        inet_ntop(AF_INET, &a->sin_addr, sa, sizeof(sa));
        inet_ntop(AF_INET, &b->sin_addr, da, sizeof(da));
        n = snprintf((char *)buf, LB_PROXY_BUILD_MAX, "PROXY TCP4 %s %s %u %u\r\n", sa, da,
                     ntohs(a->sin_port), ntohs(b->sin_port));
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)s;
        const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)d;

        inet_ntop(AF_INET6, &a->sin6_addr, sa, sizeof(sa));
        inet_ntop(AF_INET6, &b->sin6_addr, da, sizeof(da));
        n = snprintf((char *)buf, LB_PROXY_BUILD_MAX, "PROXY TCP6 %s %s %u %u\r\n", sa, da,
                     ntohs(a->sin6_port), ntohs(b->sin6_port));
    }
    return (size_t)n;           /* at most 104 bytes: it always fits */
}

/* One TLV at buf[off], when value is set and within max (a longer one is
 * left out: cut, a unique id would name another session). */
static size_t
lb_proxy_put_tlv(uint8_t *buf, size_t off, uint8_t type, const char *value, size_t max)
{
    size_t n = value != NULL ? strlen(value) : 0;

    if (n == 0 || n > max)
        return off;
    buf[off] = type;
    buf[off + 1] = (uint8_t)(n >> 8);
    buf[off + 2] = (uint8_t)n;
    memcpy(buf + off + 3, value, n);
    return off + 3 + n;
}

static size_t
lb_proxy_build_v2(uint8_t *buf, const struct sockaddr_storage *s,
                  const struct sockaddr_storage *d, const struct lb_proxy_tlvs *tlvs)
{
    size_t off = LB_PROXY_V2_HEAD, body;

    memcpy(buf, lb_proxy_v2_sig, sizeof(lb_proxy_v2_sig));
    if (s == NULL) {
        buf[12] = LB_PROXY_V2_VERSION << 4 | LB_PROXY_V2_LOCAL;
        buf[13] = LB_PROXY_V2_UNSPEC;
    } else if (s->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)s;
        const struct sockaddr_in *b = (const struct sockaddr_in *)d;

        buf[12] = LB_PROXY_V2_VERSION << 4 | LB_PROXY_V2_PROXY;
        buf[13] = LB_PROXY_V2_TCP4;
        memcpy(buf + off, &a->sin_addr, 4);
        memcpy(buf + off + 4, &b->sin_addr, 4);
        memcpy(buf + off + 8, &a->sin_port, 2);
        memcpy(buf + off + 10, &b->sin_port, 2);
        off += LB_PROXY_V2_LEN_INET;
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)s;
        const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)d;

        buf[12] = LB_PROXY_V2_VERSION << 4 | LB_PROXY_V2_PROXY;
        buf[13] = LB_PROXY_V2_TCP6;
        memcpy(buf + off, &a->sin6_addr, 16);
        memcpy(buf + off + 16, &b->sin6_addr, 16);
        memcpy(buf + off + 32, &a->sin6_port, 2);
        memcpy(buf + off + 34, &b->sin6_port, 2);
        off += LB_PROXY_V2_LEN_INET6;
    }
    if (tlvs != NULL) {
        off = lb_proxy_put_tlv(buf, off, LB_PROXY_PP2_TYPE_AUTHORITY, tlvs->authority,
                               LB_PROXY_AUTHORITY_MAX);
        off = lb_proxy_put_tlv(buf, off, LB_PROXY_PP2_TYPE_UNIQUE_ID, tlvs->unique_id,
                               LB_PROXY_UNIQUE_ID_MAX);
    }
    body = off - LB_PROXY_V2_HEAD;
    buf[14] = (uint8_t)(body >> 8);
    buf[15] = (uint8_t)body;
    return off;
}

/* 16 + 36 + (3 + 255) + (3 + 128) = 441 bytes at most. */
_Static_assert(LB_PROXY_V2_HEAD + LB_PROXY_V2_LEN_INET6 + 3 + LB_PROXY_AUTHORITY_MAX + 3 +
                   LB_PROXY_UNIQUE_ID_MAX <= LB_PROXY_BUILD_MAX,
               "LB_PROXY_BUILD_MAX holds the longest v2 header");

size_t
lb_proxy_build(uint8_t *buf, enum conf_proxy v, const struct sockaddr *src,
               const struct sockaddr *dst, const struct lb_proxy_tlvs *tlvs)
{
    struct sockaddr_storage s, d;
    bool has_addrs = src != NULL && dst != NULL && lb_proxy_same_family(src, dst, &s, &d);

    /* A family neither v1 nor v2 can carry (AF_UNIX) goes as UNKNOWN or
     * LOCAL, as HAProxy writes it: the server then takes lb as the client,
     * which is what it would see without the header. */
    switch (v) {
    case CONF_PROXY_V1:
        return lb_proxy_build_v1(buf, has_addrs ? &s : NULL, has_addrs ? &d : NULL);
    case CONF_PROXY_V2:
        return lb_proxy_build_v2(buf, has_addrs ? &s : NULL, has_addrs ? &d : NULL, tlvs);
    default:
        return 0;               /* off (or any, a frontend's word): no header */
    }
}
