/*
 * tls_hello.c - the server name (SNI, RFC 6066 section 3) a TLS client
 * asks for, read from its first flight without terminating TLS: lb routes
 * by it and relays every byte as it came.
 *
 * A session peeks at what the client sent and calls the reader again,
 * from the first byte, whenever more has come; the reader keeps nothing
 * between calls. It is a left-to-right walk over the records and, inside
 * their fragments, over the ClientHello's fields, in which every verdict
 * is taken from the bytes before the point where it is taken. Fed any
 * prefix of an input it then answers 0 or exactly what it answers for the
 * whole, and garbage is refused at the field where it shows, not at the
 * timeout. When the bytes run out it says where the field it is reading
 * ends (in the current record), so that the session peeks again about
 * once a field or a record, not once a byte. tests/fuzz/fuzz_tls_hello.c
 * checks both.
 *
 * The cap (max) bounds the whole hello, not only the part read: a record
 * or a hello whose length field says it ends past max is TOO_LONG at that
 * field. A client is then refused or not whatever the order of its
 * extensions (browsers shuffle them, which would move the server_name
 * from before the cap to after it between two connections), and at once.
 * The walk still stops at the end of the server_name extension and never
 * waits for the rest.
 */
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "lb_enum.h"

/* A record (RFC 8446 section 5.1): type, legacy_record_version (major,
 * minor), a 16-bit length, then the fragment. */
#define LB_HELLO_RECORD_HEAD 5
#define LB_HELLO_CONTENT_HANDSHAKE 22
#define LB_HELLO_VERSION_MAJOR 3
/* The longest fragment taken. RFC 8446 section 5.1 caps TLSPlaintext at
 * 2^14 bytes and has the receiver refuse a longer one (record_overflow);
 * the larger caps (2^14 + 256 in TLS 1.3, 2^14 + 2048 in TLS 1.2) are for
 * protected records, and a first flight is never protected. OpenSSL and
 * Go refuse a longer plaintext record, so no server would take the hello
 * lb let through. */
#define LB_HELLO_RECORD_MAX (1u << 14)

/* A handshake message: type(1), length(3). ClientHello (RFC 8446 section
 * 4.1.2; RFC 5246 section 7.4.1.2 has the same layout): legacy_version(2),
 * random(32), session_id<0..32>, cipher_suites<2..2^16-2> (2 bytes each),
 * compression_methods<1..2^8-1>, then extensions<..2^16-1>, which TLS 1.2
 * lets a client leave out altogether. */
#define LB_HELLO_TYPE_CLIENT_HELLO 1
#define LB_HELLO_LEGACY_VERSION 2
#define LB_HELLO_RANDOM 32
#define LB_HELLO_SESSION_ID_MAX 32

/* server_name (RFC 6066 section 3): ServerNameList<1..2^16-1> of entries
 * name_type(1), then (host_name) HostName<1..2^16-1>. */
#define LB_HELLO_EXT_SERVER_NAME 0
#define LB_HELLO_NAME_TYPE_HOST 0
#define LB_HELLO_LABEL_MAX 63

/* Where a step of the walk left it. */
enum lb_hello_step {
    LB_HELLO_GOT = 0,               /* the field is read: go on */
    LB_HELLO_WAIT,                  /* out of bytes: need says how many */
    LB_HELLO_STOP,                  /* refused: bad says why */
};

/* The walk. Positions in buf count record headers; hs counts only the
 * handshake bytes (the fragments put end to end), in which the hello's
 * nested lengths are bounds. On the stack of one call. */
struct lb_hello_rd {
    const uint8_t *buf;
    size_t len;                     /* the bytes there, at most max */
    size_t max;
    size_t pos;                     /* the next byte of buf */
    size_t rec_left;                /* of the current fragment, from pos */
    size_t records;                 /* headers read */
    size_t hs;                      /* handshake bytes read */
    size_t hello_end;               /* in hs; 0 until its length is read */
    size_t need;                    /* LB_HELLO_WAIT */
    enum lb_sni_bad bad;            /* LB_HELLO_STOP */
};

/* Goes on with the walk only when a step got its field. */
#define LB_HELLO_TRY(step)                                                  \
    do {                                                                    \
        enum lb_hello_step lb_step_ = (step);                               \
        if (lb_step_ != LB_HELLO_GOT)                                       \
            return lb_step_;                                                \
    } while (0)

static const char *const lb_sni_bad_names[] = {
    [LB_SNI_NOT_TLS] = "not_tls",
    [LB_SNI_MALFORMED] = "malformed",
    [LB_SNI_TOO_LONG] = "too_long",
    [LB_SNI_TIMEOUT] = "timeout",
    [LB_SNI_TRUNCATED] = "truncated",
};

LB_ENUM_NAME(lb_sni_bad_name, enum lb_sni_bad, lb_sni_bad_names, "unknown")

static enum lb_hello_step
lb_hello_stop(struct lb_hello_rd *rd, enum lb_sni_bad why)
{
    rd->bad = why;
    return LB_HELLO_STOP;
}

/* end is always past len and, checked before, within max. */
static enum lb_hello_step
lb_hello_wait(struct lb_hello_rd *rd, size_t end)
{
    rd->need = end;
    return LB_HELLO_WAIT;
}

/* ------------------------------------------------------------- records */

/* Whether the hello, of which hello_end handshake bytes are known, can
 * still end within max: it ends at least 5 bytes of header further for
 * every record begun, and again for any record after this one. */
static enum lb_hello_step
lb_hello_fits_cap(struct lb_hello_rd *rd)
{
    if (rd->hello_end != 0 &&
        rd->hello_end + LB_HELLO_RECORD_HEAD * rd->records > rd->max)
        return lb_hello_stop(rd, LB_SNI_TOO_LONG);
    return LB_HELLO_GOT;
}

/* The header of the next record, the last fragment being used up: a
 * handshake record, major version 3, a fragment of 1..2^14 bytes. The
 * first record's type and version are what tells TLS from what is not
 * (NOT_TLS: "GET ", an SSLv2 hello's 0x80); a later record that is wrong
 * breaks a hello that began well (MALFORMED: an alert or application data
 * between its fragments, which RFC 8446 section 5.1 forbids). Each byte
 * is judged as soon as it is there. A header that would end past max is
 * TOO_LONG before its bytes are looked at, so that a prefix answers as the
 * whole does (the whole cannot read past max either).
 *
 * A record ending past max is TOO_LONG at its length: the records of a
 * first flight carry the hello and nothing else (RFC 8446 section 5.1 has
 * a ClientHello end on a record boundary, and a client has no other
 * handshake message to send before the server answers), so the hello ends
 * there too. Every chunk the walk reads is then within max. */
static enum lb_hello_step
lb_hello_record(struct lb_hello_rd *rd)
{
    const uint8_t *h = rd->buf + rd->pos;
    size_t have = rd->len - rd->pos;
    enum lb_sni_bad wrong = rd->records == 0 ? LB_SNI_NOT_TLS : LB_SNI_MALFORMED;
    size_t frag;

    if (rd->pos + LB_HELLO_RECORD_HEAD > rd->max)
        return lb_hello_stop(rd, LB_SNI_TOO_LONG);
    if (have >= 1 && h[0] != LB_HELLO_CONTENT_HANDSHAKE)
        return lb_hello_stop(rd, wrong);
    if (have >= 2 && h[1] != LB_HELLO_VERSION_MAJOR)
        return lb_hello_stop(rd, wrong);
    /* h[2], the minor version, is not judged: clients write 0x01 in the
     * first record and 0x03 in others, and RFC 8446 section 5.1 says the
     * field "MUST be ignored for all purposes". */
    if (have < LB_HELLO_RECORD_HEAD)
        return lb_hello_wait(rd, rd->pos + LB_HELLO_RECORD_HEAD);
    frag = (size_t)h[3] << 8 | h[4];
    /* RFC 8446 section 5.1: no zero-length handshake fragments. */
    if (frag == 0 || frag > LB_HELLO_RECORD_MAX)
        return lb_hello_stop(rd, LB_SNI_MALFORMED);
    if (rd->pos + LB_HELLO_RECORD_HEAD + frag > rd->max)
        return lb_hello_stop(rd, LB_SNI_TOO_LONG);
    rd->pos += LB_HELLO_RECORD_HEAD;
    rd->rec_left = frag;
    rd->records++;
    return lb_hello_fits_cap(rd);
}

/* Bounds the next read of n (> 0) handshake bytes to the current record,
 * opening the next one when this one is used up: *chunk is how many of
 * the n it holds. The record was judged whole at its header (it ends
 * within max), so any prefix of it that is there is read as the whole
 * input would read it. */
static enum lb_hello_step
lb_hello_chunk(struct lb_hello_rd *rd, size_t n, size_t *chunk)
{
    if (rd->rec_left == 0)
        LB_HELLO_TRY(lb_hello_record(rd));
    *chunk = n < rd->rec_left ? n : rd->rec_left;
    return LB_HELLO_GOT;
}

static void
lb_hello_advance(struct lb_hello_rd *rd, size_t n)
{
    rd->pos += n;
    rd->rec_left -= n;
    rd->hs += n;
}

/* The next n handshake bytes, copied to out (a length or a type: n <= 4)
 * or skipped (out NULL), across as many records as they span. Out of
 * bytes, it waits for the end of the chunk in the current record: the
 * session peeks again once that much came, not after every byte. */
static enum lb_hello_step
lb_hello_take(struct lb_hello_rd *rd, size_t n, uint8_t *out)
{
    while (n > 0) {
        size_t chunk;

        LB_HELLO_TRY(lb_hello_chunk(rd, n, &chunk));
        if (rd->len - rd->pos < chunk)
            return lb_hello_wait(rd, rd->pos + chunk);
        if (out != NULL) {
            memcpy(out, rd->buf + rd->pos, chunk);
            out += chunk;
        }
        lb_hello_advance(rd, chunk);
        n -= chunk;
    }
    return LB_HELLO_GOT;
}

/* ------------------------------------------------------------- fields */

/* Whether n more handshake bytes stay within end, the end of the element
 * being read (the hello, the extensions, one extension, the name list):
 * a length that runs over what holds it is MALFORMED at once, before its
 * bytes are waited for. */
static enum lb_hello_step
lb_hello_within(struct lb_hello_rd *rd, size_t n, size_t end)
{
    return end - rd->hs >= n ? LB_HELLO_GOT : lb_hello_stop(rd, LB_SNI_MALFORMED);
}

/* A big-endian number of width (1..4) bytes, within end. */
static enum lb_hello_step
lb_hello_number(struct lb_hello_rd *rd, size_t width, size_t end, size_t *v)
{
    uint8_t b[4];

    LB_HELLO_TRY(lb_hello_within(rd, width, end));
    LB_HELLO_TRY(lb_hello_take(rd, width, b));
    *v = 0;
    for (size_t i = 0; i < width; i++)
        *v = *v << 8 | b[i];
    return LB_HELLO_GOT;
}

static enum lb_hello_step
lb_hello_skip(struct lb_hello_rd *rd, size_t n, size_t end)
{
    LB_HELLO_TRY(lb_hello_within(rd, n, end));
    return lb_hello_take(rd, n, NULL);
}

/* A vector's length (width bytes) that must lie in lo..hi and whose bytes
 * must fit within end. */
static enum lb_hello_step
lb_hello_vector(struct lb_hello_rd *rd, size_t width, size_t lo, size_t hi, size_t end,
                size_t *n)
{
    LB_HELLO_TRY(lb_hello_number(rd, width, end, n));
    if (*n < lo || *n > hi)
        return lb_hello_stop(rd, LB_SNI_MALFORMED);
    return lb_hello_within(rd, *n, end);
}

/* What a host_name may hold: the letters, digits and hyphen of RFC 1123,
 * and '_', which is not in a host name's rules but is in names clients do
 * ask for (service names, some internal hosts); servers take it. */
static bool
lb_hello_name_char(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* One byte of a host_name of n bytes, at i: a label byte (at most 63 in a
 * row), or a dot that ends a label that is not empty; the dot may end the
 * name (the absolute form, taken without it), and without it the name is
 * at most LB_SNI_NAME_MAX bytes. Written to name lower case (ASCII only,
 * not tolower(): the locale must not matter). */
static bool
lb_hello_name_byte(char *name, size_t i, size_t n, uint8_t c, size_t *label)
{
    if (c == '.') {
        if (*label == 0)
            return false;       /* ".a", "a..b", "." */
        *label = 0;
        if (i + 1 < n)
            name[i] = '.';
        return true;
    }
    if (!lb_hello_name_char(c) || ++*label > LB_HELLO_LABEL_MAX || i >= LB_SNI_NAME_MAX)
        return false;
    name[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    return true;
}

/* A host_name of n bytes (1..LB_SNI_NAME_MAX + 1) into name. Each byte is
 * judged as soon as it is there: a bad one is refused without waiting for
 * the rest of the chunk. That agrees with the whole, since the chunk lies
 * within max (its record was judged so at its header). */
static enum lb_hello_step
lb_hello_host_name(struct lb_hello_rd *rd, size_t n, char *name)
{
    size_t i = 0, label = 0;

    while (i < n) {
        size_t chunk, have, end;

        LB_HELLO_TRY(lb_hello_chunk(rd, n - i, &chunk));
        have = rd->len - rd->pos < chunk ? rd->len - rd->pos : chunk;
        for (size_t k = 0; k < have; k++) {
            if (!lb_hello_name_byte(name, i + k, n, rd->buf[rd->pos + k], &label))
                return lb_hello_stop(rd, LB_SNI_MALFORMED);
        }
        end = rd->pos + chunk;
        if (have < chunk)
            return lb_hello_wait(rd, end);
        lb_hello_advance(rd, chunk);
        i += chunk;
    }
    /* A trailing dot was left unwritten (the absolute form of the name). */
    name[rd->buf[rd->pos - 1] == '.' ? n - 1 : n] = '\0';
    return LB_HELLO_GOT;
}

/* The server_name extension's data, ending at end: exactly a ServerNameList
 * of at least one entry. Each entry is name_type(1) and a 16-bit length,
 * whatever its type: RFC 6066 defines only host_name, and other types are
 * skipped by that length as OpenSSL and Go read them. A second host_name
 * is MALFORMED (RFC 6066: "MUST NOT contain more than one name of the
 * same name_type"): lb routing by one name while the server takes
 * another would let a client pick its backend past the routes. */
static enum lb_hello_step
lb_hello_server_name(struct lb_hello_rd *rd, size_t end, char *name)
{
    bool has_host = false;
    size_t n;

    LB_HELLO_TRY(lb_hello_vector(rd, 2, 1, SIZE_MAX, end, &n));
    if (rd->hs + n != end)
        return lb_hello_stop(rd, LB_SNI_MALFORMED);
    name[0] = '\0';
    while (rd->hs < end) {
        size_t head, type;

        /* name_type and length in one field: one peek for both. */
        LB_HELLO_TRY(lb_hello_number(rd, 3, end, &head));
        type = head >> 16;
        n = head & 0xffff;
        LB_HELLO_TRY(lb_hello_within(rd, n, end));
        if (type != LB_HELLO_NAME_TYPE_HOST) {
            LB_HELLO_TRY(lb_hello_skip(rd, n, end));
            continue;
        }
        if (has_host || n == 0 || n > LB_SNI_NAME_MAX + 1)
            return lb_hello_stop(rd, LB_SNI_MALFORMED);
        LB_HELLO_TRY(lb_hello_host_name(rd, n, name));
        has_host = true;
    }
    return LB_HELLO_GOT;
}

/* The extensions, the last part of a hello ending at end, up to the
 * server_name one: the walk stops at its end, so what follows it is never
 * read (nor waited for). Without one, name is "" once all are read. */
static enum lb_hello_step
lb_hello_extensions(struct lb_hello_rd *rd, size_t end, char *name)
{
    size_t n;

    name[0] = '\0';
    if (rd->hs == end)
        return LB_HELLO_GOT;    /* no extensions block: TLS 1.2 allows it */
    LB_HELLO_TRY(lb_hello_number(rd, 2, end, &n));
    /* The block ends the hello (OpenSSL refuses bytes after it). */
    if (rd->hs + n != end)
        return lb_hello_stop(rd, LB_SNI_MALFORMED);
    while (rd->hs < end) {
        size_t head, type;

        /* type and length in one field: one peek for both. */
        LB_HELLO_TRY(lb_hello_number(rd, 4, end, &head));
        type = head >> 16;
        n = head & 0xffff;
        LB_HELLO_TRY(lb_hello_within(rd, n, end));
        if (type == LB_HELLO_EXT_SERVER_NAME)
            return lb_hello_server_name(rd, rd->hs + n, name);
        LB_HELLO_TRY(lb_hello_skip(rd, n, end));
    }
    return LB_HELLO_GOT;
}

/* The handshake stream: a ClientHello first (another type is NOT_TLS, as
 * a server would not take it as a first flight), each field within the
 * hello's own length. */
static enum lb_hello_step
lb_hello_client_hello(struct lb_hello_rd *rd, char *name)
{
    size_t type, n, end;

    LB_HELLO_TRY(lb_hello_number(rd, 1, SIZE_MAX, &type));
    if (type != LB_HELLO_TYPE_CLIENT_HELLO)
        return lb_hello_stop(rd, LB_SNI_NOT_TLS);
    LB_HELLO_TRY(lb_hello_number(rd, 3, SIZE_MAX, &n));
    end = rd->hs + n;
    rd->hello_end = end;
    LB_HELLO_TRY(lb_hello_fits_cap(rd));
    /* legacy_version is not judged: the record's version told TLS, and
     * the server negotiates. */
    LB_HELLO_TRY(lb_hello_skip(rd, LB_HELLO_LEGACY_VERSION + LB_HELLO_RANDOM, end));
    LB_HELLO_TRY(lb_hello_vector(rd, 1, 0, LB_HELLO_SESSION_ID_MAX, end, &n));
    LB_HELLO_TRY(lb_hello_skip(rd, n, end));
    LB_HELLO_TRY(lb_hello_vector(rd, 2, 2, SIZE_MAX, end, &n));
    if (n % 2 != 0)
        return lb_hello_stop(rd, LB_SNI_MALFORMED);
    LB_HELLO_TRY(lb_hello_skip(rd, n, end));
    LB_HELLO_TRY(lb_hello_vector(rd, 1, 1, SIZE_MAX, end, &n));
    LB_HELLO_TRY(lb_hello_skip(rd, n, end));
    return lb_hello_extensions(rd, end, name);
}

/* Bytes past max are never looked at: len is cut to it, and every record
 * ending past it was TOO_LONG at its header. The name is built on the
 * stack and copied out only with the answer 1; *need only with 0. */
int
lb_hello_sni(const uint8_t *buf, size_t len, size_t max, char *name, size_t *need,
             enum lb_sni_bad *bad)
{
    struct lb_hello_rd rd = { .buf = buf, .len = len < max ? len : max, .max = max };
    char got[LB_SNI_NAME_MAX + 1];

    switch (lb_hello_client_hello(&rd, got)) {
    case LB_HELLO_GOT:
        memcpy(name, got, strlen(got) + 1);
        return 1;
    case LB_HELLO_WAIT:
        *need = rd.need;
        return 0;
    default:
        *bad = rd.bad;
        return -1;
    }
}
