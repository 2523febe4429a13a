/*
 * agent.c - an agent check's reply: the reader that finds the line in the
 * bytes, and the parser of its words (agent.h has the contract).
 *
 * Read after HAProxy's tcpcheck_agent_expect_reply (src/tcpcheck.c), with
 * three differences, each for a reason:
 *   - an unknown word makes the whole reply an error that changes nothing,
 *     where HAProxy applies the words it knows and reports the first it
 *     does not: a reply we half understand is not the agent's verdict;
 *   - one state word at most, where HAProxy keeps the last of each of its
 *     two categories (health: up, down; admin: ready, drain, maint): for
 *     us they are one column of the rotation decision, and "up drain" has
 *     no one meaning in it;
 *   - a line the agent ends by closing counts (agent.h, the reader).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "agent.h"
#include "lb_enum.h"

/* The longest part of a word an error message quotes: enough to tell
 * which it was, short enough for a log line. */
#define HC_AGENT_QUOTE_MAX 40

#define HC_AGENT_STR_(x) #x
#define HC_AGENT_STR(x) HC_AGENT_STR_(x)
static const char hc_agent_too_long[] =
    "agent reply longer than " HC_AGENT_STR(HC_AGENT_LINE_MAX) " bytes";

static const char *const hc_agent_state_names[] = {
    [HC_AGENT_STATE_NONE] = "none",
    [HC_AGENT_STATE_UP] = "up",
    [HC_AGENT_STATE_READY] = "ready",
    [HC_AGENT_STATE_DOWN] = "down",
    [HC_AGENT_STATE_DRAIN] = "drain",
    [HC_AGENT_STATE_MAINT] = "maint",
};

LB_ENUM_NAME(hc_agent_state_name, enum hc_agent_state, hc_agent_state_names, "unknown")

/* ------------------------------------------------------------ the reader */

void
hc_agent_reader_init(struct hc_agent_reader *r)
{
    memset(r, 0, sizeof(*r));
}

static enum hc_agent_read
hc_agent_reader_fail(struct hc_agent_reader *r, const char *error)
{
    r->state = HC_AGENT_READ_ERROR;
    r->error = error;
    r->len = 0;
    r->line[0] = '\0';
    return r->state;
}

/* The line is complete in line[0..len): drops the '\r' that ended it and
 * checks its length. */
static enum hc_agent_read
hc_agent_reader_end(struct hc_agent_reader *r)
{
    if (r->len > 0 && r->line[r->len - 1] == '\r')
        r->len--;
    if (r->len > HC_AGENT_LINE_MAX)
        return hc_agent_reader_fail(r, hc_agent_too_long);
    r->line[r->len] = '\0';
    r->state = HC_AGENT_READ_LINE;
    return r->state;
}

enum hc_agent_read
hc_agent_reader_feed(struct hc_agent_reader *r, const void *buf, size_t n)
{
    /* the line and a '\r' that may be its end: one byte more is too long
     * whatever follows */
    const size_t room = HC_AGENT_LINE_MAX + 1;
    const char *nl;
    size_t take;

    if (r->state != HC_AGENT_READ_MORE || n == 0)
        return r->state;
    nl = memchr(buf, '\n', n);
    take = nl != NULL ? (size_t)(nl - (const char *)buf) : n;
    if (take > room - r->len)
        return hc_agent_reader_fail(r, hc_agent_too_long);
    memcpy(r->line + r->len, buf, take);
    r->len += take;
    return nl != NULL ? hc_agent_reader_end(r) : r->state;
}

enum hc_agent_read
hc_agent_reader_eof(struct hc_agent_reader *r)
{
    if (r->state != HC_AGENT_READ_MORE)
        return r->state;
    if (r->len == 0)
        return hc_agent_reader_fail(r, "agent closed the connection without a reply");
    return hc_agent_reader_end(r);
}

/* ------------------------------------------------------------ the parser */

struct hc_agent_word {
    const char *s;
    size_t len;
};

static bool
hc_agent_is_separator(char c)
{
    return c == ' ' || c == '\t' || c == ',';
}

static bool
hc_agent_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool
hc_agent_is_printable(char c)
{
    return (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f;
}

/* A word as an error message quotes it: printable, bounded. */
static void
hc_agent_quote(char *buf, size_t size, struct hc_agent_word w)
{
    size_t n = w.len < HC_AGENT_QUOTE_MAX ? w.len : HC_AGENT_QUOTE_MAX, i;

    for (i = 0; i < n && i + 1 < size; i++)
        buf[i] = hc_agent_is_printable(w.s[i]) ? w.s[i] : '?';
    buf[i] = '\0';
    if (w.len > n)
        snprintf(buf + i, size - i, "...");
}

static int
hc_agent_fail(struct hc_agent_reply *out, char *err, size_t errlen, const char *what,
              struct hc_agent_word w, const char *after)
{
    char q[HC_AGENT_QUOTE_MAX + 4];

    memset(out, 0, sizeof(*out));
    hc_agent_quote(q, sizeof(q), w);
    if (errlen > 0)
        snprintf(err, errlen, "agent reply: %s \"%s\"%s", what, q, after);
    return -1;
}

/* "two states \"up\" and \"drain\"": the second word of a kind. */
static int
hc_agent_fail_twice(struct hc_agent_reply *out, char *err, size_t errlen, const char *kinds,
                    struct hc_agent_word first, struct hc_agent_word second)
{
    char q[HC_AGENT_QUOTE_MAX + 4], what[HC_AGENT_QUOTE_MAX + 32];

    hc_agent_quote(q, sizeof(q), first);
    snprintf(what, sizeof(what), "two %s \"%s\" and", kinds, q);
    return hc_agent_fail(out, err, errlen, what, second, "");
}

static bool
hc_agent_word_is(struct hc_agent_word w, const char *name)
{
    return w.len == strlen(name) && strncasecmp(w.s, name, w.len) == 0;
}

/* Digits only, at least one, at most max: false otherwise. */
static bool
hc_agent_number(const char *s, size_t len, uint32_t max, uint32_t *out)
{
    uint64_t v = 0;

    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > max)
            return false;       /* also keeps v from overflowing */
    }
    *out = (uint32_t)v;
    return true;
}

static enum hc_agent_state
hc_agent_state_of(struct hc_agent_word w)
{
    for (size_t i = HC_AGENT_STATE_UP; i <= HC_AGENT_STATE_MAINT; i++) {
        if (hc_agent_word_is(w, hc_agent_state_names[i]))
            return (enum hc_agent_state)i;
    }
    return HC_AGENT_STATE_NONE;
}

/* The note: after the '#' and its blanks, to the end but its trailing
 * blanks, bounded and printable. */
static void
hc_agent_note(struct hc_agent_reply *out, const char *s, size_t len)
{
    size_t start = 0, end = len, n;

    while (start < end && hc_agent_is_blank(s[start]))
        start++;
    while (end > start && hc_agent_is_blank(s[end - 1]))
        end--;
    n = end - start < HC_AGENT_NOTE_MAX ? end - start : HC_AGENT_NOTE_MAX;
    for (size_t i = 0; i < n; i++)
        out->note[i] = hc_agent_is_printable(s[start + i]) ? s[start + i] : '?';
    out->note[n] = '\0';
    out->has_note = true;
}

int
hc_agent_parse(const char *line, size_t len, struct hc_agent_reply *out, char *err,
               size_t errlen)
{
    static const char maxconn[] = "maxconn:";
    const size_t maxconn_len = sizeof(maxconn) - 1;
    struct hc_agent_word state_word = { 0 }, percent_word = { 0 }, maxconn_word = { 0 };
    size_t i = 0;

    memset(out, 0, sizeof(*out));
    while (i < len) {
        struct hc_agent_word w;
        enum hc_agent_state st;

        if (hc_agent_is_separator(line[i])) {
            i++;
            continue;
        }
        if (line[i] == '#') {           /* the rest of the line */
            hc_agent_note(out, line + i + 1, len - i - 1);
            break;
        }
        /* a '#' ends a word too: "up#busy" is up and a note */
        w.s = line + i;
        while (i < len && !hc_agent_is_separator(line[i]) && line[i] != '#')
            i++;
        w.len = (size_t)(line + i - w.s);

        if ((st = hc_agent_state_of(w)) != HC_AGENT_STATE_NONE) {
            if (out->state != HC_AGENT_STATE_NONE)
                return hc_agent_fail_twice(out, err, errlen, "states", state_word, w);
            out->state = st;
            state_word = w;
        } else if (w.s[w.len - 1] == '%') {
            if (out->has_percent)
                return hc_agent_fail_twice(out, err, errlen, "weights", percent_word, w);
            if (!hc_agent_number(w.s, w.len - 1, 100, &out->percent))
                return hc_agent_fail(out, err, errlen, "bad weight", w, " (0% to 100%)");
            out->has_percent = true;
            percent_word = w;
        } else if (w.len >= maxconn_len && strncasecmp(w.s, maxconn, maxconn_len) == 0) {
            if (out->has_maxconn)
                return hc_agent_fail_twice(out, err, errlen, "maxconns", maxconn_word, w);
            if (!hc_agent_number(w.s + maxconn_len, w.len - maxconn_len, HC_AGENT_MAXCONN_MAX,
                                 &out->maxconn))
                return hc_agent_fail(out, err, errlen, "bad maxconn", w, " (0 to 1000000)");
            out->has_maxconn = true;
            maxconn_word = w;
        } else {
            return hc_agent_fail(out, err, errlen, "unknown word", w, "");
        }
    }
    return 0;
}
