/*
 * conf_value.c - parsers for one config value each. See conf_value.h.
 */
#include "conf_value.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>

struct conf_unit {
    const char *suffix;
    uint64_t ms;
};

struct conf_bool_word {
    const char *word;
    bool value;
};

static bool conf_is_digit(char c);
static bool conf_is_blank(char c);
static int conf_parse_digits(const char *s, size_t n, uint64_t *out);
static int conf_parse_port(const char *s, uint16_t *out);
static int conf_expect_item(const char *s, size_t n,
                            struct conf_expect *out, char *err,
                            size_t errlen);

static const struct conf_unit conf_units[] = {
    { "ms", 1 },
    { "s", 1000 },
    { "m", 60 * 1000 },
    { "h", 60 * 60 * 1000 },
};

static const struct conf_bool_word conf_bool_words[] = {
    { "on", true },   { "off", false },
    { "yes", true },  { "no", false },
    { "true", true }, { "false", false },
    { "1", true },    { "0", false },
};

#define CONF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* isdigit() and isspace() depend on the locale and take an int that must
 * be an unsigned char value; config syntax is plain ASCII. */
static bool
conf_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool
conf_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool
conf_name_chars_are(const char *s, const char *more)
{
    size_t n = 0;

    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              conf_is_digit(c) || c == '_' || c == '.' || c == '-' ||
              (more != NULL && strchr(more, c) != NULL)))
            return false;
    }
    return n >= 1 && n <= CONF_NAME_MAX;
}

bool
conf_name_is_valid(const char *s)
{
    return conf_name_chars_are(s, NULL);
}

bool
conf_server_name_is_valid(const char *s)
{
    return conf_name_chars_are(s, ":@[]");
}

/* Parses exactly n bytes of s as digits. Returns 0, -1 when not all are
 * digits (or n == 0), -2 on overflow. strtoull alone would accept a sign
 * and leading spaces, so every byte is checked before it runs. */
static int
conf_parse_digits(const char *s, size_t n, uint64_t *out)
{
    char buf[32];
    char *end;
    unsigned long long v;
    size_t i;

    if (n == 0)
        return -1;
    for (i = 0; i < n; i++)
        if (!conf_is_digit(s[i]))
            return -1;
    /* Leading zeros change no value, however many there are; only then
     * does the length tell an overflow. */
    while (n > 1 && *s == '0') {
        s++;
        n--;
    }
    if (n >= sizeof(buf))
        return -2;              /* 32 digits overflow 64 bits anyway */
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    v = strtoull(buf, &end, 10);
    if (errno == ERANGE)
        return -2;
    if (*end != '\0')
        return -1;
    *out = v;
    return 0;
}

int
conf_parse_uint(const char *s, uint64_t *out, char *err, size_t errlen)
{
    int rc;

    if (*s == '\0') {
        snprintf(err, errlen, "empty value (expected a number)");
        return -1;
    }
    rc = conf_parse_digits(s, strlen(s), out);
    if (rc == -2) {
        snprintf(err, errlen, "\"%s\" is too large", s);
        return -1;
    }
    if (rc < 0) {
        snprintf(err, errlen, "\"%s\" is not a number", s);
        return -1;
    }
    return 0;
}

int
conf_parse_duration(const char *s, uint64_t *out_ms, char *err,
                    size_t errlen)
{
    size_t ndigits = 0;
    uint64_t v;
    size_t i;
    int rc;

    if (*s == '\0') {
        snprintf(err, errlen,
                 "empty value (expected a duration such as 500ms, 30s, 5m "
                 "or 1h)");
        return -1;
    }
    while (conf_is_digit(s[ndigits]))
        ndigits++;
    rc = conf_parse_digits(s, ndigits, &v);
    if (rc == -1) {
        snprintf(err, errlen, "\"%s\" is not a duration (use ms, s, m or h)",
                 s);
        return -1;
    }
    if (rc == -2) {
        snprintf(err, errlen, "\"%s\" is too large", s);
        return -1;
    }
    if (s[ndigits] == '\0') {
        /* Zero is zero in any unit; any other bare number is ambiguous. */
        if (v == 0) {
            *out_ms = 0;
            return 0;
        }
        snprintf(err, errlen, "\"%s\" needs a unit (ms, s, m or h)", s);
        return -1;
    }
    for (i = 0; i < CONF_ARRAY_LEN(conf_units); i++) {
        if (strcmp(s + ndigits, conf_units[i].suffix) != 0)
            continue;
        if (v > UINT64_MAX / conf_units[i].ms) {
            snprintf(err, errlen, "\"%s\" is too large", s);
            return -1;
        }
        *out_ms = v * conf_units[i].ms;
        return 0;
    }
    snprintf(err, errlen, "\"%s\" is not a duration (use ms, s, m or h)", s);
    return -1;
}

void
conf_format_duration(uint64_t ms, char *buf, size_t len)
{
    size_t i;

    if (ms == 0) {
        snprintf(buf, len, "0");
        return;
    }
    for (i = CONF_ARRAY_LEN(conf_units); i-- > 0;) {
        if (ms % conf_units[i].ms == 0) {
            snprintf(buf, len, "%llu%s",
                     (unsigned long long)(ms / conf_units[i].ms),
                     conf_units[i].suffix);
            return;
        }
    }
}

int
conf_parse_bool(const char *s, bool *out, char *err, size_t errlen)
{
    size_t i;

    for (i = 0; i < CONF_ARRAY_LEN(conf_bool_words); i++) {
        if (strcasecmp(s, conf_bool_words[i].word) == 0) {
            *out = conf_bool_words[i].value;
            return 0;
        }
    }
    snprintf(err, errlen, "\"%s\" is not on or off (use on/off, yes/no, "
             "true/false or 1/0)", s);
    return -1;
}

int
conf_parse_enum(const char *s, const char *const *names, int *out,
                char *err, size_t errlen)
{
    size_t used;
    int i;

    for (i = 0; names[i] != NULL; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    used = (size_t)snprintf(err, errlen, "\"%s\" is not one of", s);
    for (i = 0; names[i] != NULL && used < errlen; i++) {
        const char *sep = i == 0 ? " " : names[i + 1] != NULL ? ", " : " or ";
        used += (size_t)snprintf(err + used, errlen - used, "%s%s", sep,
                                 names[i]);
    }
    return -1;
}

int
conf_parse_count_or_percent(const char *s, struct conf_count_or_percent *out,
                            char *err, size_t errlen)
{
    size_t n = strlen(s);
    bool is_percent = n > 0 && s[n - 1] == '%';
    uint64_t v;
    int rc;

    if (n == 0) {
        snprintf(err, errlen,
                 "empty value (expected a count or a percentage, e.g. 2 "
                 "or 50%%)");
        return -1;
    }
    rc = conf_parse_digits(s, is_percent ? n - 1 : n, &v);
    if (rc == -1) {
        snprintf(err, errlen,
                 "\"%s\" is not a count or a percentage (e.g. 2 or 50%%)", s);
        return -1;
    }
    if (rc == -2 || v > UINT32_MAX) {
        snprintf(err, errlen, "\"%s\" is too large", s);
        return -1;
    }
    if (is_percent && v > 100) {
        snprintf(err, errlen, "%s is out of range (0%%..100%%)", s);
        return -1;
    }
    out->value = (uint32_t)v;
    out->is_percent = is_percent;
    return 0;
}

/* One item of check_expect, already trimmed: "200" or "200-399". */
static int
conf_expect_item(const char *s, size_t n, struct conf_expect *out,
                 char *err, size_t errlen)
{
    const char *dash = memchr(s, '-', n);
    size_t nlo = dash ? (size_t)(dash - s) : n;
    uint64_t lo, hi;

    if (conf_parse_digits(s, nlo, &lo) != 0 ||
        (dash && conf_parse_digits(dash + 1, n - nlo - 1, &hi) != 0)) {
        snprintf(err, errlen,
                 "\"%.*s\" is not a status code or range (e.g. 200 or "
                 "200-399)", (int)n, s);
        return -1;
    }
    if (!dash)
        hi = lo;
    if (lo < CONF_STATUS_MIN || lo > CONF_STATUS_MAX ||
        hi < CONF_STATUS_MIN || hi > CONF_STATUS_MAX) {
        snprintf(err, errlen, "status code %llu is out of range (%d..%d)",
                 (unsigned long long)(lo < CONF_STATUS_MIN ||
                                      lo > CONF_STATUS_MAX ? lo : hi),
                 CONF_STATUS_MIN, CONF_STATUS_MAX);
        return -1;
    }
    if (lo > hi) {
        snprintf(err, errlen,
                 "range \"%.*s\" is reversed (write the lower code first)",
                 (int)n, s);
        return -1;
    }
    if (out->nranges == CONF_EXPECT_MAX_RANGES) {
        snprintf(err, errlen, "more than %d codes or ranges",
                 CONF_EXPECT_MAX_RANGES);
        return -1;
    }
    out->ranges[out->nranges].lo = (uint16_t)lo;
    out->ranges[out->nranges].hi = (uint16_t)hi;
    out->nranges++;
    return 0;
}

size_t
conf_list_next(const char **p, const char **item, bool *more)
{
    const char *comma = strchr(*p, ',');
    const char *start = *p, *end = comma ? comma : *p + strlen(*p);

    while (start < end && conf_is_blank(*start))
        start++;
    while (end > start && conf_is_blank(end[-1]))
        end--;
    *item = start;
    *more = comma != NULL;
    *p = comma ? comma + 1 : end;
    return (size_t)(end - start);
}

int
conf_parse_expect(const char *s, struct conf_expect *out, char *err,
                  size_t errlen)
{
    struct conf_expect e;
    const char *p = s, *item;
    bool more = true;

    memset(&e, 0, sizeof(e));
    while (more) {
        size_t n = conf_list_next(&p, &item, &more);

        if (n == 0) {
            snprintf(err, errlen,
                     *s == '\0' ? "empty value (expected status codes or "
                                  "ranges, e.g. 200,204,300-399)"
                                : "\"%s\" has an empty item (expected "
                                  "status codes or ranges, e.g. "
                                  "200,204,300-399)", s);
            return -1;
        }
        if (conf_expect_item(item, n, &e, err, errlen) != 0)
            return -1;
    }
    *out = e;
    return 0;
}

/* A DNS name as a Host header carries it: labels of letters, digits, '-'
 * and '_' (browsers send names with '_' although RFC 1123 has none), 1 to
 * 63 characters each, not starting or ending with '-'. */
static bool
conf_host_name_is_valid(const char *s, size_t n)
{
    size_t label = 0;

    if (n == 0 || n > CONF_HOST_MAX)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (label == 0 || label > 63 || s[i - label] == '-' || s[i - 1] == '-')
                return false;
            label = 0;
        } else if (isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_') {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

/* An IPv4 address, or an IPv6 one in brackets, as a Host header writes
 * it. */
static bool
conf_host_ip_is_valid(const char *s, size_t n)
{
    char buf[INET6_ADDRSTRLEN + 2];
    unsigned char addr[sizeof(struct in6_addr)];
    bool is_v6 = n >= 2 && s[0] == '[' && s[n - 1] == ']';

    if (n >= sizeof(buf))
        return false;
    memcpy(buf, s + is_v6, n - 2 * is_v6);
    buf[n - 2 * is_v6] = '\0';
    return inet_pton(is_v6 ? AF_INET6 : AF_INET, buf, addr) == 1;
}

int
conf_parse_hosts(const char *s, struct conf_hosts *out, char *err,
                 size_t errlen)
{
    struct conf_hosts h;
    const char *p = s, *item;
    bool more = true;

    memset(&h, 0, sizeof(h));
    while (more) {
        size_t n = conf_list_next(&p, &item, &more);

        if (n == 0 && !more && h.n == 0)
            break;                      /* blank: no extra host, the default */
        if (n == 0) {
            snprintf(err, errlen, "\"%s\" has an empty item (expected host "
                     "names or IP addresses, e.g. lb.example.com, 10.0.0.5)", s);
            return -1;
        }
        if (!conf_host_ip_is_valid(item, n) && !conf_host_name_is_valid(item, n)) {
            if (item[0] != '[' && memchr(item, ':', n) != NULL)
                snprintf(err, errlen, "\"%.*s\": write the name without a port "
                         "(any port is accepted)", (int)n, item);
            else
                snprintf(err, errlen, "\"%.*s\" is not a host name or IP "
                         "address (letters, digits, - _ and . ; IPv6 in "
                         "brackets; no wildcard)", (int)n, item);
            return -1;
        }
        if (h.n == CONF_HOSTS_MAX) {
            snprintf(err, errlen, "more than %d hosts", CONF_HOSTS_MAX);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            h.names[h.n][i] = (char)tolower((unsigned char)item[i]);
        h.n++;
    }
    *out = h;
    return 0;
}

/* What a list of blocks looks like, for the messages. */
#define CONF_CIDRS_EXPECTED "(expected addresses or ADDR/PREFIX blocks, e.g. " \
                            "10.0.0.0/8, 2001:db8::/32, 192.0.2.7)"

/* One item of a list of blocks, already trimmed: n bytes at s. */
static int
conf_cidr_item(const char *s, size_t n, struct conf_cidr *out, char *err,
               size_t errlen)
{
    char buf[INET6_ADDRSTRLEN], net[INET6_ADDRSTRLEN];
    const char *slash = memchr(s, '/', n);
    size_t alen = slash != NULL ? (size_t)(slash - s) : n;
    unsigned char addr[16] = { 0 }, masked[16] = { 0 };
    int family, bits;
    uint64_t prefix;

    if (alen >= sizeof(buf) || alen == 0) {     /* longer than any address */
        snprintf(err, errlen, "\"%.*s\" is not an IPv4 or IPv6 address (write ADDR "
                 "or ADDR/PREFIX, e.g. 192.0.2.7 or 10.0.0.0/8; names are not "
                 "looked up)", (int)n, s);
        return -1;
    }
    memcpy(buf, s, alen);
    buf[alen] = '\0';
    family = memchr(buf, ':', alen) != NULL ? AF_INET6 : AF_INET;
    if (inet_pton(family, buf, addr) != 1) {
        if (buf[0] == '[')
            snprintf(err, errlen, "\"%.*s\": write an IPv6 block without "
                     "brackets (e.g. 2001:db8::/32)", (int)n, s);
        else
            snprintf(err, errlen, "\"%.*s\" is not an IPv4 or IPv6 address "
                     "(write ADDR or ADDR/PREFIX, e.g. 192.0.2.7 or "
                     "10.0.0.0/8; names are not looked up)", (int)n, s);
        return -1;
    }
    bits = family == AF_INET ? 32 : 128;
    prefix = (uint64_t)bits;
    if (slash != NULL &&
        (conf_parse_digits(slash + 1, n - alen - 1, &prefix) != 0 ||
         prefix > (uint64_t)bits)) {
        snprintf(err, errlen, "\"%.*s\": the prefix after / is not 0..%d",
                 (int)n, s, bits);
        return -1;
    }
    for (int i = 0; i < bits / 8; i++) {
        int keep = (int)prefix - 8 * i;     /* bits of byte i in the prefix */

        masked[i] = keep >= 8 ? addr[i]
                    : keep <= 0 ? 0 : (unsigned char)(addr[i] & (0xff << (8 - keep)));
    }
    /* A block written with host bits is most likely a host's address
     * with the prefix of its network: say which network that is rather
     * than match a block the writer did not mean. */
    if (memcmp(addr, masked, (size_t)bits / 8) != 0) {
        inet_ntop(family, masked, net, sizeof(net));
        snprintf(err, errlen, "\"%.*s\" has bits set past its /%u: did you "
                 "mean %s/%u?", (int)n, s, (unsigned)prefix, net, (unsigned)prefix);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    if (family == AF_INET6 && prefix >= 96 &&
        memcmp(addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
        family = AF_INET;               /* ::ffff:a.b.c.d/N: see conf_value.h */
        memcpy(out->addr, addr + 12, 4);
        prefix -= 96;
    } else {
        memcpy(out->addr, addr, (size_t)bits / 8);
    }
    out->family = (uint8_t)family;
    out->prefix = (uint8_t)prefix;
    return 0;
}

int
conf_parse_cidrs(const char *s, struct conf_cidrs *out, char *err,
                 size_t errlen)
{
    struct conf_cidrs l;
    const char *p = s, *item;
    bool more = true;

    l.n = 0;
    while (more) {
        size_t n = conf_list_next(&p, &item, &more);

        if (n == 0) {
            if (*s == '\0')
                snprintf(err, errlen, "empty value " CONF_CIDRS_EXPECTED);
            else
                snprintf(err, errlen, "\"%s\" has an empty item " CONF_CIDRS_EXPECTED, s);
            return -1;
        }
        if (l.n == CONF_CIDRS_MAX) {
            snprintf(err, errlen, "more than %d addresses or blocks (longer lists "
                     "belong in the firewall, e.g. an nftables set)", CONF_CIDRS_MAX);
            return -1;
        }
        if (conf_cidr_item(item, n, &l.v[l.n], err, errlen) != 0)
            return -1;
        l.n++;
    }
    /* The unused entries zeroed: two equal lists are then equal bytes
     * (memcmp), whatever a list held before. */
    out->n = l.n;
    memcpy(out->v, l.v, l.n * sizeof(l.v[0]));
    memset(out->v + l.n, 0, (CONF_CIDRS_MAX - l.n) * sizeof(l.v[0]));
    return 0;
}

int
conf_parse_rate(const char *s, uint64_t *out, char *err, size_t errlen)
{
    const char *slash = strchr(s, '/');
    size_t n = slash != NULL ? (size_t)(slash - s) : strlen(s);
    uint64_t v;
    int rc;

    if (*s == '\0') {
        snprintf(err, errlen, "empty value (expected a rate N/s, e.g. 100/s; "
                 "0/s for no limit)");
        return -1;
    }
    rc = conf_parse_digits(s, n, &v);
    if (rc == -1) {
        snprintf(err, errlen, "\"%s\" is not a rate (write N/s, e.g. 100/s)", s);
        return -1;
    }
    if (rc == -2) {
        snprintf(err, errlen, "\"%s\" is too large", s);
        return -1;
    }
    if (slash == NULL) {
        snprintf(err, errlen, "\"%s\" needs its unit: write N/s, e.g. %s/s (new "
                 "connections per second)", s, s);
        return -1;
    }
    if (strcmp(slash, "/s") != 0) {
        snprintf(err, errlen, "\"%s\": the rate is per second (write N/s, e.g. "
                 "100/s)", s);
        return -1;
    }
    *out = v;
    return 0;
}

static int
conf_parse_port(const char *s, uint16_t *out)
{
    uint64_t v;

    if (conf_parse_digits(s, strlen(s), &v) != 0 || v < 1 || v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

enum conf_addr_status
conf_parse_addr(const char *s, bool is_listen, struct conf_addr *out,
                char *err, size_t errlen)
{
    char host[sizeof(out->text)];
    const char *port;
    size_t hostlen;
    bool is_v6 = false;
    struct addrinfo hints, *res = NULL;
    uint16_t portnum;
    int rc;

    if (strlen(s) >= sizeof(out->text)) {
        snprintf(err, errlen, "address is too long (at most %zu characters)",
                 sizeof(out->text) - 1);
        return CONF_ADDR_BAD;
    }
    if (strpbrk(s, " \t") != NULL) {
        snprintf(err, errlen, "\"%s\": an address has no spaces", s);
        return CONF_ADDR_BAD;
    }
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL) {
            snprintf(err, errlen, "\"%s\" has no ] after the IPv6 address", s);
            return CONF_ADDR_BAD;
        }
        if (rb[1] == '\0') {
            snprintf(err, errlen, "\"%s\" has no port (use HOST:PORT or "
                     "[IPV6]:PORT)", s);
            return CONF_ADDR_NO_PORT;
        }
        if (rb[1] != ':') {
            snprintf(err, errlen, "\"%s\": expected :PORT after ]", s);
            return CONF_ADDR_BAD;
        }
        hostlen = (size_t)(rb - s - 1);
        memcpy(host, s + 1, hostlen);
        port = rb + 2;
        is_v6 = true;
        if (hostlen == 0) {
            snprintf(err, errlen, "\"%s\" has no address between [ and ]", s);
            return CONF_ADDR_BAD;
        }
    } else {
        const char *colon = strrchr(s, ':');
        if (colon == NULL) {
            snprintf(err, errlen, "\"%s\" has no port (use HOST:PORT or "
                     "[IPV6]:PORT)", s);
            return CONF_ADDR_NO_PORT;
        }
        hostlen = (size_t)(colon - s);
        if (memchr(s, ':', hostlen) != NULL) {
            snprintf(err, errlen, "\"%s\": write an IPv6 address in brackets "
                     "([::1]:80)", s);
            return CONF_ADDR_BAD;
        }
        memcpy(host, s, hostlen);
        port = colon + 1;
    }
    host[hostlen] = '\0';
    if (*port == '\0') {
        snprintf(err, errlen, "\"%s\" has no port (use HOST:PORT or "
                 "[IPV6]:PORT)", s);
        return CONF_ADDR_NO_PORT;
    }
    if (conf_parse_port(port, &portnum) != 0) {
        snprintf(err, errlen, "\"%s\": port \"%s\" is not 1..65535", s, port);
        return CONF_ADDR_BAD;
    }
    if (!is_v6 && (hostlen == 0 || strcmp(host, "*") == 0)) {
        if (!is_listen) {
            snprintf(err, errlen, "\"%s\" has no host", s);
            return CONF_ADDR_BAD;
        }
        strcpy(host, "0.0.0.0");
    }

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = is_v6 ? AF_INET6 : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* Brackets promise a literal: never ask DNS for what is a typo. */
    hints.ai_flags = AI_NUMERICSERV | (is_v6 ? AI_NUMERICHOST : 0);
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        char ebuf[128];
        /* A literal fails as EAI_NONAME, or as EAI_ADDRFAMILY when it is
         * an IPv4 one: either way the text is the problem, not DNS. */
        if (is_v6 && rc != EAI_MEMORY && rc != EAI_SYSTEM) {
            snprintf(err, errlen, "\"%s\": \"%s\" is not an IPv6 address", s,
                     host);
            return CONF_ADDR_BAD;
        }
        snprintf(err, errlen, "address \"%s\" does not resolve (%s)", s,
                 rc == EAI_SYSTEM ? conf_strerror(errno, ebuf, sizeof(ebuf))
                                  : gai_strerror(rc));
        return CONF_ADDR_UNRESOLVED;
    }
    memset(out, 0, sizeof(*out));
    if (res->ai_addrlen > sizeof(out->ss)) {
        freeaddrinfo(res);
        snprintf(err, errlen, "\"%s\": unsupported address family", s);
        return CONF_ADDR_BAD;
    }
    memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
    out->len = res->ai_addrlen;
    strcpy(out->text, s);
    freeaddrinfo(res);
    return CONF_ADDR_OK;
}

bool
conf_addr_overlaps(const struct conf_addr *a, const struct conf_addr *b)
{
    if (a->ss.ss_family != b->ss.ss_family)
        return false;
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)&a->ss;
        const struct sockaddr_in *y = (const struct sockaddr_in *)&b->ss;
        return x->sin_port == y->sin_port &&
               (x->sin_addr.s_addr == y->sin_addr.s_addr ||
                x->sin_addr.s_addr == htonl(INADDR_ANY) ||
                y->sin_addr.s_addr == htonl(INADDR_ANY));
    }
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->ss;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->ss;
        return x->sin6_port == y->sin6_port &&
               (memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0 ||
                memcmp(&x->sin6_addr, &in6addr_any, 16) == 0 ||
                memcmp(&y->sin6_addr, &in6addr_any, 16) == 0);
    }
    return false;
}

size_t
conf_next_token(const char **p)
{
    size_t n = 0;

    while (conf_is_blank(**p))
        (*p)++;
    while ((*p)[n] != '\0' && !conf_is_blank((*p)[n]))
        n++;
    return n;
}

/* How a server line is written, for its messages. */
#define CONF_SERVER_USAGE \
    "use NAME HOST:PORT [weight=N] [max_connections=N] [send_proxy=off|v1|v2] " \
    "[agent_port=N]"

/* send_proxy's values, the pool key's (conf_keys.c), in enum conf_proxy's
 * order: "any" is for accept_proxy only. */
static const char *const conf_server_proxy_names[] = { "off", "v1", "v2", NULL };

/* The options after a server's address: each NAME=VALUE, at most once.
 * VALUE is a number min..max, or one of names when names is set. */
struct conf_server_opt {
    const char *name;
    uint64_t min, max;
    const char *const *names;
    size_t offset;                      /* of a uint32_t or an enum (an int:
                                           conf_keys.c asserts its size) in
                                           conf_server */
};

static const struct conf_server_opt conf_server_opts[] = {
    { "weight", CONF_WEIGHT_MIN, CONF_WEIGHT_MAX, NULL, offsetof(struct conf_server, weight) },
    { "max_connections", 0, CONF_SERVER_CONNS_MAX, NULL,
      offsetof(struct conf_server, max_connections) },
    { "send_proxy", 0, 0, conf_server_proxy_names, offsetof(struct conf_server, send_proxy) },
    { "agent_port", 1, 65535, NULL, offsetof(struct conf_server, agent_port) },
};
#define CONF_SERVER_NOPTS (sizeof(conf_server_opts) / sizeof(conf_server_opts[0]))

/* An option's value of names: vlen bytes at v. A longer value than word
 * holds is cut, in the message too: no name is that long. */
static int
conf_parse_server_word(const char *name, const struct conf_server_opt *o, const char *v,
                       size_t vlen, int *out, char *err, size_t errlen)
{
    char word[32], msg[160];

    snprintf(word, sizeof(word), "%.*s", (int)vlen, v);
    if (conf_parse_enum(word, o->names, out, msg, sizeof(msg)) == 0)
        return 0;
    snprintf(err, errlen, "server %s: %s %s", name, o->name, msg);
    return -1;
}

static int
conf_parse_server_opt(const char *name, const char *p, size_t n, struct conf_server *out,
                      unsigned *seen, char *err, size_t errlen)
{
    const char *eq = memchr(p, '=', n);
    size_t klen = eq != NULL ? (size_t)(eq - p) : n;

    for (size_t k = 0; k < CONF_SERVER_NOPTS; k++) {
        const struct conf_server_opt *o = &conf_server_opts[k];
        const char *v = p + klen + 1;
        size_t vlen = n - klen - 1;
        void *field = (char *)out + o->offset;
        uint64_t x;
        int rc, word;

        if (eq == NULL || strlen(o->name) != klen || memcmp(o->name, p, klen) != 0)
            continue;
        if (*seen & (1u << k)) {
            snprintf(err, errlen, "server %s: %s is given twice", name, o->name);
            return -1;
        }
        *seen |= 1u << k;
        if (o->names != NULL) {
            if (conf_parse_server_word(name, o, v, vlen, &word, err, errlen) != 0)
                return -1;
            memcpy(field, &word, sizeof(word));
            return 0;
        }
        rc = conf_parse_digits(v, vlen, &x);
        if (rc == -1) {
            snprintf(err, errlen, "server %s: %s \"%.*s\" is not a number",
                     name, o->name, (int)vlen, v);
            return -1;
        }
        if (rc == -2 || x < o->min || x > o->max) {
            snprintf(err, errlen, "server %s: %s %.*s is out of range "
                     "(%llu..%llu)", name, o->name, (int)vlen, v,
                     (unsigned long long)o->min, (unsigned long long)o->max);
            return -1;
        }
        *(uint32_t *)field = (uint32_t)x;
        return 0;
    }
    snprintf(err, errlen, "server %s: unknown option \"%.*s\" (%s)", name,
             (int)n, p, CONF_SERVER_USAGE);
    return -1;
}

int
conf_parse_server(const char *s, char *name, struct conf_server *out,
                  char *err, size_t errlen)
{
    static const char conf_server_usage[] = CONF_SERVER_USAGE;
    char abuf[CONF_ADDR_TEXT_MAX];
    char msg[384];
    struct conf_addr addr;
    const char *p = s;
    unsigned seen = 0;
    size_t n;

    n = conf_next_token(&p);
    if (n == 0) {
        snprintf(err, errlen, "server: empty value (%s)", conf_server_usage);
        return -1;
    }
    if (n > CONF_NAME_MAX) {
        snprintf(err, errlen, "server: name \"%.*s\" is longer than %d "
                 "characters", (int)n, p, CONF_NAME_MAX);
        return -1;
    }
    memcpy(name, p, n);
    name[n] = '\0';
    if (!conf_server_name_is_valid(name)) {
        snprintf(err, errlen, "server: name \"%s\" is invalid (use 1 to %d "
                 "of A-Z a-z 0-9 _ . - : @ [ ])", name, CONF_NAME_MAX);
        return -1;
    }
    p += n;

    n = conf_next_token(&p);
    if (n == 0) {
        snprintf(err, errlen, "server: \"%s\" has no address (%s)", s,
                 conf_server_usage);
        return -1;
    }
    if (n >= sizeof(abuf)) {
        snprintf(err, errlen, "server %s: address is too long", name);
        return -1;
    }
    memcpy(abuf, p, n);
    abuf[n] = '\0';
    p += n;
    switch (conf_parse_addr(abuf, false, &addr, msg, sizeof(msg))) {
    case CONF_ADDR_OK:
        break;
    case CONF_ADDR_NO_PORT:
        snprintf(err, errlen, "server: \"%s\" has no port (%s)", s,
                 conf_server_usage);
        return -1;
    default:
        snprintf(err, errlen, "server %s: %s", name, msg);
        return -1;
    }

    out->weight = 1;
    out->max_connections = 0;
    out->send_proxy = CONF_PROXY_POOL;
    while ((n = conf_next_token(&p)) != 0) {
        if (conf_parse_server_opt(name, p, n, out, &seen, err, errlen) != 0)
            return -1;
        p += n;
    }
    /* a server's address is IPv4 or IPv6 (conf_parse_addr resolves to
     * nothing else), which its union holds */
    if (addr.len > sizeof(out->addr.sa)) {
        snprintf(err, errlen, "server %s: %s is neither IPv4 nor IPv6", name, addr.text);
        return -1;
    }
    if ((out->addr.text = strdup(addr.text)) == NULL) {
        snprintf(err, errlen, "server %s: out of memory", name);
        return -1;
    }
    memcpy(&out->addr.sa, &addr.ss, addr.len);
    out->addr.len = addr.len;
    return 0;
}

bool
conf_find_binary(const char *buf, size_t len, int *line, size_t *col,
                 unsigned char *byte)
{
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0, bol = 0;
    int lineno = 1;

    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        bool ok;

        if (c < 0x80) {
            if (c == '\n') {
                lineno++;
                bol = ++i;
                continue;
            }
            /* \r is part of a line end only; elsewhere it would hide text
             * on a terminal. */
            ok = c == '\t' || (c >= 0x20 && c != 0x7f) ||
                 (c == '\r' && (i + 1 == len || s[i + 1] == '\n'));
            n = 1;
        } else {
            /* RFC 3629 table 3-7: second-byte limits rule out overlong
             * forms, surrogates and code points past U+10FFFF. */
            unsigned char lo = 0x80, hi = 0xbf;
            if (c >= 0xc2 && c <= 0xdf)
                n = 2;
            else if (c >= 0xe0 && c <= 0xef)
                n = 3;
            else if (c >= 0xf0 && c <= 0xf4)
                n = 4;
            else
                n = 0;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
            else if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
            ok = n != 0 && i + n <= len;
            for (size_t k = 1; ok && k < n; k++) {
                ok = s[i + k] >= lo && s[i + k] <= hi;
                lo = 0x80;      /* only the second byte has special limits */
                hi = 0xbf;
            }
        }
        if (!ok) {
            *line = lineno;
            *col = i - bol + 1;
            *byte = c;
            return true;
        }
        i += n;
    }
    return false;
}

const char *
conf_strerror(int errnum, char *buf, size_t len)
{
#if defined(_GNU_SOURCE) && defined(__GLIBC__)
    /* The build defines _GNU_SOURCE, which selects glibc's strerror_r: it
     * returns the message, in buf or in a static string. */
    return strerror_r(errnum, buf, len);
#else
    if (strerror_r(errnum, buf, len) != 0)
        snprintf(buf, len, "error %d", errnum);
    return buf;
#endif
}
