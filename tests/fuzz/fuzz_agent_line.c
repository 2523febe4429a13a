/*
 * fuzz_agent_line.c - what an agent check reads from its agent
 * (health/agent.c): the reader of its line and the parser of its words.
 *
 * The input is what the agent sends. The reader is fed it whole, cut in
 * two at every offset that can matter (the reader has its verdict once it
 * holds HC_AGENT_LINE_MAX + 2 bytes), and in pieces whose sizes come from
 * the input; each once with the agent staying and once with it closing
 * after the last byte. Every run must give the same state, line and error,
 * and keep within its buffer. The line, and the raw input too, must parse
 * without a crash into a reply within its bounds (a note of printable
 * ASCII, it goes into /stats) or into an empty reply and a one-line
 * message of printable ASCII, it goes into log lines.
 */
#include "agent.h"
#include "fuzz.h"

struct fuzz_read {
    enum hc_agent_read state;
    size_t len;
    char line[HC_AGENT_LINE_MAX + 2];
    const char *error;
};

/* cut: the first piece's size; then pieces of the rest whole (step 0) or
 * sized from the input's bytes. */
static void
fuzz_read(struct fuzz_read *out, const uint8_t *data, size_t size, size_t cut, bool by_bytes,
          bool closed)
{
    struct hc_agent_reader r;
    size_t off, k;

    hc_agent_reader_init(&r);
    hc_agent_reader_feed(&r, data, cut);
    for (off = cut; off < size; off += k) {
        k = by_bytes ? 1 + data[off] % 16 : size - off;
        if (k > size - off)
            k = size - off;
        hc_agent_reader_feed(&r, data + off, k);
        FUZZ_CHECK(r.len <= HC_AGENT_LINE_MAX + 1);
    }
    if (closed)
        FUZZ_CHECK(hc_agent_reader_eof(&r) != HC_AGENT_READ_MORE);
    FUZZ_CHECK(r.len <= HC_AGENT_LINE_MAX + 1);
    memset(out, 0, sizeof(*out));
    out->state = r.state;
    out->len = r.len;
    out->error = r.error;
    if (r.state == HC_AGENT_READ_LINE) {
        FUZZ_CHECK(r.len <= HC_AGENT_LINE_MAX && r.line[r.len] == '\0');
        memcpy(out->line, r.line, r.len);
    }
    if (r.state == HC_AGENT_READ_ERROR)
        fuzz_check_message(r.error, strlen(r.error) + 1);
    else
        FUZZ_CHECK(r.error == NULL);
}

static bool
fuzz_same(const struct fuzz_read *a, const struct fuzz_read *b)
{
    return a->state == b->state && a->len == b->len && memcmp(a->line, b->line, a->len) == 0 &&
           (a->error == NULL) == (b->error == NULL) &&
           (a->error == NULL || strcmp(a->error, b->error) == 0);
}

static bool
fuzz_is_printable(const char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    }
    return true;
}

/* Parses len bytes and checks the reply's promises; the same bytes give
 * the same reply twice. */
static void
fuzz_parse(const char *line, size_t len)
{
    static const struct hc_agent_reply empty;
    struct hc_agent_reply r, again;
    char err[160], err2[160];
    int rc = hc_agent_parse(line, len, &r, err, sizeof(err));

    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        FUZZ_CHECK(r.state >= HC_AGENT_STATE_NONE && r.state <= HC_AGENT_STATE_MAINT);
        FUZZ_CHECK(!r.has_percent ? r.percent == 0 : r.percent <= 100);
        FUZZ_CHECK(!r.has_maxconn ? r.maxconn == 0 : r.maxconn <= HC_AGENT_MAXCONN_MAX);
        FUZZ_CHECK(strnlen(r.note, sizeof(r.note)) <= HC_AGENT_NOTE_MAX);
        FUZZ_CHECK(fuzz_is_printable(r.note));
        FUZZ_CHECK(r.has_note || r.note[0] == '\0');
        FUZZ_CHECK(memchr(line, '#', len) != NULL || !r.has_note);
    } else {
        FUZZ_CHECK(memcmp(&r, &empty, sizeof(r)) == 0);
        fuzz_check_message(err, sizeof(err));
        FUZZ_CHECK(fuzz_is_printable(err));
        FUZZ_CHECK(strncmp(err, "agent reply: ", 13) == 0);
    }
    FUZZ_CHECK(hc_agent_parse(line, len, &again, err2, sizeof(err2)) == rc);
    FUZZ_CHECK(memcmp(&r, &again, sizeof(r)) == 0);
    FUZZ_CHECK(rc == 0 || strcmp(err, err2) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* past this, every reader has its verdict: more cuts add nothing */
    size_t cuts = size < HC_AGENT_LINE_MAX + 3 ? size : HC_AGENT_LINE_MAX + 3;

    for (int closed = 0; closed < 2; closed++) {
        struct fuzz_read whole, split;

        fuzz_read(&whole, data, size, size, false, closed);
        /* while the agent stays, only a line too long is an error */
        FUZZ_CHECK(closed || whole.state != HC_AGENT_READ_ERROR ||
                   strcmp(whole.error, "agent reply longer than 256 bytes") == 0);
        for (size_t cut = 0; cut < cuts; cut++) {
            fuzz_read(&split, data, size, cut, false, closed);
            FUZZ_CHECK(fuzz_same(&whole, &split));
        }
        fuzz_read(&split, data, size, 0, true, closed);
        FUZZ_CHECK(fuzz_same(&whole, &split));
        if (whole.state == HC_AGENT_READ_LINE)
            fuzz_parse(whole.line, whole.len);
    }
    fuzz_parse((const char *)data, size);
    return 0;
}
