/*
 * fuzz_bal_lines.c - the one line parser and formatter (balancer/lines.c)
 * on kinds of every shape: one with a field of every type
 * (tests/unit/balancer/lines_fixture.h), the shape of a hand-over's member
 * line, a keyword alone, and the state file's two kinds through
 * balancer/saved.c.
 *
 * The first byte picks the kind and the direction, the rest is the input:
 *   - a line (cut at its first NUL or line end, as the readers hand lines
 *     over): parsed; a line that parses formats to a line that parses to
 *     the same values, and, but for a time's decimals, to itself; a refusal
 *     says why in one line;
 *   - a record, raw bytes: formatted; a line written parses back to the
 *     same values (lb never writes a line it would not read).
 */
#include "bal.h"
#include "bal_lines.h"
#include "fuzz.h"
#include "lines_fixture.h"      /* kind: a field of every type */

/* the shape of lb/reload/members.c's member line */
struct member {
    enum { API = 0, DNS } source;
    char pool[64], name[64], address[280];
    uint32_t weight, max_connections;
};

static const char *const sources[] = { [API] = "api", [DNS] = "dns" };

static const struct bal_line_field member_fields[] = {
    BAL_LINE_ENUM_FIELD("source", struct member, source, sources),
    BAL_LINE_WORD_FIELD("pool", struct member, pool),
    BAL_LINE_WORD_FIELD("name", struct member, name),
    BAL_LINE_WORD_FIELD("address", struct member, address),
    BAL_LINE_UINT_FIELD("weight", struct member, weight, 0, UINT32_MAX),
    BAL_LINE_UINT_FIELD("max_connections", struct member, max_connections, 0, UINT32_MAX),
};

static const struct bal_line_kind member_kind = BAL_LINE_KIND("member", member_fields);
static const struct bal_line_kind end_kind = { .keyword = "end" };

static const struct {
    const struct bal_line_kind *kind;
    size_t size;                        /* of its record */
    bool has_time;                      /* a time has more than one spelling */
} kinds[] = {
    { &kind, sizeof(struct rec), true },
    { &member_kind, sizeof(struct member), false },
    { &end_kind, 1, false },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

#define REC_MAX sizeof(struct member)   /* the largest record */

/* rec's fields alone, into canon (zeroed): what a record means, without
 * its padding or the bytes after a word's NUL. */
static void
canonical(const struct bal_line_kind *k, const void *rec, unsigned char *canon)
{
    memset(canon, 0, REC_MAX);
    for (size_t i = 0; i < k->nfields; i++) {
        const struct bal_line_field *f = &k->fields[i];
        size_t n = f->type == BAL_LINE_WORD ? strnlen((const char *)rec + f->offset, f->size)
                                            : f->size;

        memcpy(canon + f->offset, (const char *)rec + f->offset, n);
    }
}

/* The line out (k > 0 bytes, as the formatter wrote it) parses to the
 * record's values. */
static void
check_reads_back(const struct bal_line_kind *k, const void *rec, char *out, size_t n)
{
    unsigned char back[REC_MAX], want[REC_MAX], got[REC_MAX];
    char err[160];

    FUZZ_CHECK(n > 0 && out[n - 1] == '\n' && strlen(out) == n);
    FUZZ_CHECK(strchr(out, '\n') == out + n - 1);
    out[n - 1] = '\0';
    memset(back, 0, sizeof(back));
    FUZZ_CHECK(bal_line_parse(out, k, back, err, sizeof(err)) == 0);
    canonical(k, rec, want);
    canonical(k, back, got);
    FUZZ_CHECK(memcmp(want, got, sizeof(want)) == 0);
}

static void
fuzz_kind_line(size_t ki, const char *line)
{
    const struct bal_line_kind *k = kinds[ki].kind;
    unsigned char rec[REC_MAX];
    char out[700], err[160];
    size_t n;

    memset(rec, 0, sizeof(rec));
    err[0] = '\0';
    if (bal_line_parse(line, k, rec, err, sizeof(err)) == -1) {
        fuzz_check_message(err, sizeof(err));
        return;
    }
    FUZZ_CHECK(bal_line_is(line, k));
    n = bal_line_format(out, sizeof(out), k, rec);
    FUZZ_CHECK(n > 0);
    check_reads_back(k, rec, out, n);
    if (!kinds[ki].has_time)
        FUZZ_CHECK(strcmp(out, line) == 0);
}

static void
fuzz_kind_record(size_t ki, const uint8_t *data, size_t size)
{
    const struct bal_line_kind *k = kinds[ki].kind;
    unsigned char rec[REC_MAX];
    char out[700];
    size_t n;

    memset(rec, 0, sizeof(rec));
    memcpy(rec, data, size < kinds[ki].size ? size : kinds[ki].size);
    /* a bool's object is 0 or 1: any other byte is not a bool lb has */
    if (ki == 0 && rec[offsetof(struct rec, is_on)] > 1)
        rec[offsetof(struct rec, is_on)] &= 1;
    n = bal_line_format(out, sizeof(out), k, rec);
    if (n > 0)
        check_reads_back(k, rec, out, n);
    else
        FUZZ_CHECK(out[0] == '\0');
}

/* The state file's lines: server lines have one spelling, the header
 * reads back to the same time. */
static void
fuzz_saved_line(const char *line)
{
    struct bal_saved s, back;
    char out[700], err[160];
    double t = -1, t2 = -1;
    size_t n;

    err[0] = '\0';
    if (bal_saved_parse(line, &s, err, sizeof(err)) == 0) {
        n = bal_saved_format(out, sizeof(out), &s);
        FUZZ_CHECK(n > 0 && out[n - 1] == '\n');
        out[n - 1] = '\0';
        FUZZ_CHECK(strcmp(out, line) == 0);
        FUZZ_CHECK(bal_saved_parse(out, &back, err, sizeof(err)) == 0);
        FUZZ_CHECK(memcmp(&s, &back, sizeof(s)) == 0);
    } else {
        fuzz_check_message(err, sizeof(err));
    }
    if (bal_saved_header(line, &t) == 0) {
        FUZZ_CHECK(t >= 0);
        n = bal_saved_format_header(out, sizeof(out), t);
        FUZZ_CHECK(n > 0 && out[n - 1] == '\n');
        out[n - 1] = '\0';
        FUZZ_CHECK(bal_saved_header(out, &t2) == 0 && t2 == t);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char line[600];
    size_t n = 0, pick;

    if (size == 0)
        return 0;
    pick = data[0] % (2 * NKINDS + 1);
    data++;
    size--;
    if (pick >= NKINDS && pick < 2 * NKINDS) {
        fuzz_kind_record(pick - NKINDS, data, size);
        return 0;
    }
    while (n < size && n < sizeof(line) - 1 && data[n] != '\0' && data[n] != '\n')
        n++;
    memcpy(line, data, n);
    line[n] = '\0';
    if (pick < NKINDS)
        fuzz_kind_line(pick, line);
    else
        fuzz_saved_line(line);
    return 0;
}
