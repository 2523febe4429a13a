/*
 * fuzz_tls_hello.c - the ClientHello reader (lb/core/tls_hello.c), as a
 * frontend with routes meets it: a client's first bytes, from anyone, in
 * any number of reads.
 *
 * For a few caps, the input is read whole, then every prefix of it: each
 * prefix must answer 0 with a need past it and within the cap, or exactly
 * the whole's answer (the same name, or -1 with the same reason), since a
 * session reads again after each arrival and must not decide differently
 * because the hello came in pieces. A name is what routes compare: lower
 * case, at most 253 bytes, labels of [a-z0-9_-], no trailing dot. Then the
 * input's records are framed again at another size (the first byte of the
 * input picks it): the handshake bytes are the same, so a hello with a
 * name must give that name again, or too_long when the extra headers take
 * the whole hello past the cap.
 */
#include "core.h"
#include "fuzz.h"

/* Bytes past this never matter: no cap is larger. */
#define FUZZ_HELLO_SCAN 65536

static void
fuzz_check_name(const char *name)
{
    size_t n = strlen(name), label = 0;

    FUZZ_CHECK(n <= LB_SNI_NAME_MAX);
    FUZZ_CHECK(n == 0 || name[n - 1] != '.');
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (c == '.') {
            FUZZ_CHECK(label != 0);
            label = 0;
            continue;
        }
        FUZZ_CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
        FUZZ_CHECK(++label <= 63);
    }
}

static int
fuzz_read(const uint8_t *data, size_t size, size_t max, char *name, enum lb_sni_bad *bad)
{
    char pname[LB_SNI_NAME_MAX + 1];
    enum lb_sni_bad pbad;
    size_t need = 0;
    int w = lb_hello_sni(data, size, max, name, &need, bad);

    FUZZ_CHECK(w >= -1 && w <= 1);
    if (w == 0)
        FUZZ_CHECK(need > size && need <= max);
    if (w == 1)
        fuzz_check_name(name);
    if (w == -1)
        FUZZ_CHECK(*bad == LB_SNI_NOT_TLS || *bad == LB_SNI_MALFORMED ||
                   *bad == LB_SNI_TOO_LONG);
    for (size_t k = 0; k < size && k <= FUZZ_HELLO_SCAN; k++) {
        size_t pneed = 0;
        int r = lb_hello_sni(data, k, max, pname, &pneed, &pbad);

        if (r == 0) {
            FUZZ_CHECK(pneed > k && pneed <= max);
            continue;
        }
        FUZZ_CHECK(r == w);
        FUZZ_CHECK(r != 1 || strcmp(pname, name) == 0);
        FUZZ_CHECK(r != -1 || pbad == *bad);
        break;      /* the same walk: every longer prefix answers so too */
    }
    return w;
}

/* The handshake bytes of data's leading handshake records (the last one
 * as far as it goes), framed again in records of per bytes. */
static size_t
fuzz_reframe(const uint8_t *data, size_t size, size_t per, uint8_t *out, size_t cap)
{
    static uint8_t hs[FUZZ_HELLO_SCAN];
    size_t off = 0, n = 0, o = 0;

    while (off + 5 <= size && data[off] == 22 && data[off + 1] == 3) {
        size_t l = (size_t)data[off + 3] << 8 | data[off + 4];

        if (l > size - off - 5)
            l = size - off - 5;         /* the last record may be cut */
        if (l == 0 || n + l > sizeof(hs))
            break;
        memcpy(hs + n, data + off + 5, l);
        n += l;
        off += 5 + l;
    }
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;

        if (o + 5 + k > cap)
            return 0;
        out[o++] = 22, out[o++] = 3, out[o++] = 1;
        out[o++] = (uint8_t)(k >> 8), out[o++] = (uint8_t)k;
        memcpy(out + o, hs + i, k);
        o += k;
    }
    return o;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[] = { 256, 1024, 16384, 65536 };
    static uint8_t again[2 * FUZZ_HELLO_SCAN];
    char name[LB_SNI_NAME_MAX + 1], name2[LB_SNI_NAME_MAX + 1];
    enum lb_sni_bad bad, bad2;

    if (size > FUZZ_HELLO_SCAN)
        size = FUZZ_HELLO_SCAN;
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        size_t n, per;

        if (fuzz_read(data, size, caps[c], name, &bad) != 1 || size == 0)
            continue;
        per = 1 + (size_t)data[size - 1] * 7 % 16384;
        n = fuzz_reframe(data, size, per, again, sizeof(again));
        if (n == 0 || n > caps[c])
            continue;
        /* Smaller records take more headers: the whole hello framed so
         * may no longer fit the cap (which bounds all of it), but nothing
         * else may change. */
        if (fuzz_read(again, n, caps[c], name2, &bad2) == 1)
            FUZZ_CHECK(strcmp(name, name2) == 0);
        else
            FUZZ_CHECK(lb_hello_sni(again, n, caps[c], name2, &per, &bad2) == -1 &&
                       bad2 == LB_SNI_TOO_LONG);
    }
    return 0;
}
