/*
 * fuzz_tls_hello.c - the SNI reader (lb/core/tls_hello.c), as a frontend
 * with routes meets it: bytes from anyone, peeked again from the first
 * byte whenever more came.
 *
 * For a few caps (sni_max_bytes's floor and default, a small one, and the
 * input's own length) the input is read whole, then its prefixes: each
 * must answer 0, wanting more than it has and no more than the cap, or
 * exactly the whole's answer (the same name, or -1 with the same reason),
 * since a session must not route differently because the hello came in
 * pieces. The session's own way of reading is followed too: from 0
 * bytes, then at each need, and every length short of a need must answer
 * 0 with that need (waiting for it misses nothing). A name is what a
 * route may compare: lower case [a-z0-9_-], labels of 1..63 bytes, at
 * most 253 bytes, no trailing dot. Then the input's handshake bytes are
 * re-framed into other records (two, cut where the input says; and many
 * small ones): the answer must stay the same, since records are framing
 * and not content.
 */
#include "core.h"
#include "fuzz.h"

/* Prefixes scanned one by one: past this, only the session's way (each
 * need) and the cap are read, so a 64 KiB input stays fast. */
#define FUZZ_SNI_SCAN 1024
/* The cap of the re-framing check: it adds record headers, and the same
 * name must come whatever the framing when the cap is not in the way. No
 * cap at all: a hello's length may say 2^24 - 1 bytes, and every record
 * adds 5. */
#define FUZZ_SNI_BIG_CAP SIZE_MAX
#define FUZZ_SNI_RECORD_MAX 16384

struct fuzz_answer {
    int rc;
    char name[LB_SNI_NAME_MAX + 1];
    size_t need;
    enum lb_sni_bad bad;
};

static bool
fuzz_untouched(const char *name)
{
    return name[0] == '#' && strnlen(name, LB_SNI_NAME_MAX + 1) == LB_SNI_NAME_MAX;
}

/* What a route may compare: see the top of the file. */
static void
fuzz_check_name(const char *name)
{
    size_t n = strnlen(name, LB_SNI_NAME_MAX + 1), label = 0;

    FUZZ_CHECK(n <= LB_SNI_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (c == '.') {
            FUZZ_CHECK(label > 0);
            label = 0;
            continue;
        }
        FUZZ_CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
        FUZZ_CHECK(++label <= 63);
    }
    FUZZ_CHECK(n == 0 || label > 0);
}

/* Asks, and checks that only the answer's own outputs were written. */
static struct fuzz_answer
fuzz_ask(const uint8_t *data, size_t len, size_t max)
{
    struct fuzz_answer a;

    memset(a.name, '#', sizeof(a.name));
    a.name[LB_SNI_NAME_MAX] = '\0';
    a.need = 0;
    a.bad = LB_SNI_BADS;
    a.rc = lb_hello_sni(data, len, max, a.name, &a.need, &a.bad);
    FUZZ_CHECK(a.rc >= -1 && a.rc <= 1);
    if (a.rc == 1) {
        fuzz_check_name(a.name);
        FUZZ_CHECK(a.need == 0 && a.bad == LB_SNI_BADS);
    } else if (a.rc == 0) {
        FUZZ_CHECK(a.need > len && a.need <= max);
        FUZZ_CHECK(fuzz_untouched(a.name) && a.bad == LB_SNI_BADS);
    } else {
        FUZZ_CHECK(a.bad == LB_SNI_NOT_TLS || a.bad == LB_SNI_MALFORMED ||
                   a.bad == LB_SNI_TOO_LONG);
        FUZZ_CHECK(strcmp(lb_sni_bad_name(a.bad), "unknown") != 0);
        FUZZ_CHECK(fuzz_untouched(a.name) && a.need == 0);
    }
    return a;
}

static bool
fuzz_same(const struct fuzz_answer *a, const struct fuzz_answer *b)
{
    return a->rc == b->rc && (a->rc != 1 || strcmp(a->name, b->name) == 0) &&
           (a->rc != -1 || a->bad == b->bad);
}

/* A prefix answers 0 or the whole's answer. */
static void
fuzz_check_prefix(const uint8_t *data, size_t k, size_t max, const struct fuzz_answer *whole)
{
    struct fuzz_answer p = fuzz_ask(data, k, max);

    FUZZ_CHECK(p.rc == 0 || fuzz_same(&p, whole));
}

/* The session's way: ask at 0 bytes, then once need bytes came. A length
 * short of need never has the name: it waits for that same need, or is
 * refused already (a wrong byte in the field being read is judged when it
 * is there; the prefix rule makes it the whole's answer). The last answer
 * within the input is the whole's; when its need is past the input, the
 * whole has no name either (waiting for need never misses one). */
static void
fuzz_follow_needs(const uint8_t *data, size_t size, size_t max, const struct fuzz_answer *whole)
{
    struct fuzz_answer a = fuzz_ask(data, 0, max);

    while (a.rc == 0 && a.need <= size) {
        size_t have = a.need;
        struct fuzz_answer b = fuzz_ask(data, have - 1, max);

        FUZZ_CHECK((b.rc == 0 && b.need == have) || b.rc == -1);
        a = fuzz_ask(data, have, max);
        FUZZ_CHECK(a.rc != 0 || a.need > have);
    }
    FUZZ_CHECK(a.rc != 0 ? fuzz_same(&a, whole) : whole->rc != 1);
}

static struct fuzz_answer
fuzz_read(const uint8_t *data, size_t size, size_t max)
{
    struct fuzz_answer whole = fuzz_ask(data, size, max);

    for (size_t k = 0; k < size && k <= FUZZ_SNI_SCAN; k++)
        fuzz_check_prefix(data, k, max, &whole);
    /* At max bytes the answer is known (a wait would be past the cap), and
     * the bytes after them are never looked at. */
    if (size > max) {
        struct fuzz_answer at_cap = fuzz_ask(data, max, max);

        FUZZ_CHECK(at_cap.rc != 0 && fuzz_same(&at_cap, &whole));
    }
    fuzz_follow_needs(data, size, max, &whole);
    return whole;
}

/* The fragments of the input's leading handshake records, end to end (the
 * last may be cut by the input's end), into hs (size bytes). Stops at the
 * first header that is not a handshake record of 1..2^14 bytes. */
static size_t
fuzz_unframe(const uint8_t *data, size_t size, uint8_t *hs)
{
    size_t off = 0, n = 0;

    while (size - off >= 5 && data[off] == 22 && data[off + 1] == 3) {
        size_t frag = (size_t)data[off + 3] << 8 | data[off + 4];
        size_t k;

        if (frag == 0 || frag > FUZZ_SNI_RECORD_MAX)
            break;
        k = size - off - 5 < frag ? size - off - 5 : frag;
        memcpy(hs + n, data + off + 5, k);
        n += k;
        off += 5 + k;
    }
    return n;
}

/* hs[from..to) as records of at most each bytes, appended at out + *len. */
static void
fuzz_frame(uint8_t *out, size_t *len, const uint8_t *hs, size_t from, size_t to, size_t each)
{
    for (size_t off = from; off < to; off += each) {
        size_t k = to - off < each ? to - off : each;

        out[(*len)++] = 22;
        out[(*len)++] = 3;
        out[(*len)++] = 1;
        out[(*len)++] = (uint8_t)(k >> 8);
        out[(*len)++] = (uint8_t)k;
        memcpy(out + *len, hs + off, k);
        *len += k;
    }
}

/* The input's handshake bytes in other records. */
struct fuzz_reframed {
    uint8_t *two;                   /* two records, cut where the input says */
    size_t two_len;
    uint8_t *small;                 /* records of 1..16 bytes */
    size_t small_len;
};

/* Both framings, or false when the input has fewer than 2 handshake
 * bytes to cut. The cut and the record size come from the input's last
 * two bytes. */
static bool
fuzz_reframe(const uint8_t *data, size_t size, struct fuzz_reframed *r)
{
    uint8_t *hs;
    size_t n;
    unsigned seed;

    r->two = r->small = NULL;
    if (size < 7)
        return false;
    if ((hs = malloc(size)) == NULL)
        abort();
    n = fuzz_unframe(data, size, hs);
    if (n < 2) {
        free(hs);
        return false;
    }
    r->two = malloc(n + 2 * 5 * (n / FUZZ_SNI_RECORD_MAX + 1));
    r->small = malloc(6 * n);       /* a header for every byte at worst */
    if (r->two == NULL || r->small == NULL)
        abort();
    seed = (unsigned)data[size - 1] << 8 | data[size - 2];
    r->two_len = r->small_len = 0;
    /* Each part split again at 2^14, the most a record holds. */
    fuzz_frame(r->two, &r->two_len, hs, 0, 1 + seed % (n - 1), FUZZ_SNI_RECORD_MAX);
    fuzz_frame(r->two, &r->two_len, hs, 1 + seed % (n - 1), n, FUZZ_SNI_RECORD_MAX);
    fuzz_frame(r->small, &r->small_len, hs, 0, n, 1 + seed % 16);
    free(hs);
    return true;
}

/* Framed otherwise, a hello that gave a name or waited at this cap gives
 * the same, or TOO_LONG: the cap bounds the whole hello, and the added
 * headers can take it past (never anything else). */
static void
fuzz_check_reframed(const uint8_t *buf, size_t len, size_t max, const struct fuzz_answer *orig)
{
    struct fuzz_answer a = fuzz_ask(buf, len, max);

    FUZZ_CHECK(fuzz_same(&a, orig) || (a.rc == -1 && a.bad == LB_SNI_TOO_LONG));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A small cap, sni_max_bytes's floor, one between, its default, and
     * one the input just fits. */
    const size_t caps[] = { 64, 256, 512, 16384, size };
    struct fuzz_reframed r;
    bool has_reframed = fuzz_reframe(data, size, &r);

    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        struct fuzz_answer whole = fuzz_read(data, size, caps[i]);

        if (has_reframed && whole.rc != -1) {
            fuzz_check_reframed(r.two, r.two_len, caps[i], &whole);
            fuzz_check_reframed(r.small, r.small_len, caps[i], &whole);
        }
    }
    /* With a cap the headers cannot reach: exactly the same, and the
     * re-framed stream keeps the prefix rule. */
    if (has_reframed) {
        struct fuzz_answer whole = fuzz_ask(data, size, FUZZ_SNI_BIG_CAP);

        if (whole.rc != -1) {
            struct fuzz_answer two = fuzz_read(r.two, r.two_len, FUZZ_SNI_BIG_CAP);
            struct fuzz_answer small = fuzz_ask(r.small, r.small_len, FUZZ_SNI_BIG_CAP);

            FUZZ_CHECK(fuzz_same(&two, &whole) && fuzz_same(&small, &whole));
        }
    }
    free(r.two);
    free(r.small);
    return 0;
}
