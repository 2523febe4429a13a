/*
 * agent.h - an agent check's reply (HAProxy's agent-check), read and
 * parsed as pure code: the probe moves the bytes, nothing here touches a
 * socket.
 *
 * An agent is a small service beside the server that answers each
 * connection with one line about the server, words in any order,
 * separated by spaces, tabs or commas (issue 29, "Agent check"):
 *
 *   up | ready | down | drain | maint   its state (one at most)
 *   N%                                  a share of its configured weight,
 *                                       0% to 100%
 *   maxconn:N                           its max_connections, 0 to
 *                                       1000000 (0: no limit)
 *   #text                               the rest of the line: a note for
 *                                       /stats
 *
 * so that one reply carries all of them: "up 50% maxconn:5 #busy" (one
 * of HAProxy's bugs, haproxy/haproxy#2039, was a reply that could not).
 * Words are case-insensitive. A reply with an unknown word, a bad number,
 * two state words or two of the same kind is an error naming the word, and
 * changes nothing: the caller keeps the agent's previous verdict, as it
 * does when the agent cannot be reached. An empty line is a valid reply
 * that changes nothing.
 *
 * Memory is bounded: the reader keeps one line in HC_AGENT_LINE_MAX bytes
 * (and a '\r'), a reply's note is HC_AGENT_NOTE_MAX bytes at most. An
 * endless reply costs this buffer, never more.
 */
#ifndef HC_AGENT_H
#define HC_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HC_AGENT_LINE_MAX 256           /* a reply's bytes, '\r' and '\n'
                                           not counted */
#define HC_AGENT_NOTE_MAX 64            /* a note's bytes, '\0' not counted */
#define HC_AGENT_MAXCONN_MAX 1000000u   /* as the config's max_connections */

/* ------------------------------------------------------------ the reader
 * Fed the agent's bytes in whatever pieces they come, it says when the
 * line is complete; the result never depends on the split. The line ends
 * at the first '\n' (a '\r' just before it is not part of it). What comes
 * after the line is ignored: an agent says one line a connection. The
 * agent closing after some bytes but before a '\n' ends the line too
 * (hc_agent_reader_eof): an agent that writes "up" and closes means "up".
 * HAProxy ignores such a line ("Ignoring incomplete line from agent"); we
 * take it because a line is only ever used whole and valid (hc_agent_parse
 * refuses what it does not know) and such agents are common in scripts.
 */
enum hc_agent_read {
    HC_AGENT_READ_MORE = 0,         /* no complete line yet: feed more */
    HC_AGENT_READ_LINE,             /* line[0..len) is the reply */
    HC_AGENT_READ_ERROR,            /* error says what was wrong */
};

struct hc_agent_reader {
    enum hc_agent_read state;       /* once LINE or ERROR, it stays so */
    const char *error;              /* a static string, with ERROR */
    size_t len;
    char line[HC_AGENT_LINE_MAX + 2];   /* the line, a '\r' that may yet
                                           precede its '\n', and a '\0'
                                           after it (the line itself may
                                           hold NUL bytes: use len) */
};

void hc_agent_reader_init(struct hc_agent_reader *r);

/* n more bytes came (any n, 0 too). Returns the reader's state. */
enum hc_agent_read hc_agent_reader_feed(struct hc_agent_reader *r, const void *buf, size_t n);

/* The agent closed the connection: what it sent before is the line, or,
 * when it sent nothing, an error. Returns the reader's state (never MORE). */
enum hc_agent_read hc_agent_reader_eof(struct hc_agent_reader *r);

/* ------------------------------------------------------------ the parser */
enum hc_agent_state {
    HC_AGENT_STATE_NONE = 0,        /* the reply has no state word */
    HC_AGENT_STATE_UP,
    HC_AGENT_STATE_READY,           /* for us the same as up: both lift
                                       only the agent's own earlier down,
                                       drain or maint */
    HC_AGENT_STATE_DOWN,
    HC_AGENT_STATE_DRAIN,
    HC_AGENT_STATE_MAINT,
};

/* "none", "up", "ready", "down", "drain", "maint": for logs and JSON. */
const char *hc_agent_state_name(enum hc_agent_state s);

/* One reply: each part is there or not (a reply need not carry all). */
struct hc_agent_reply {
    enum hc_agent_state state;
    bool has_percent;
    uint32_t percent;               /* 0..100 */
    bool has_maxconn;
    uint32_t maxconn;               /* 0..HC_AGENT_MAXCONN_MAX, 0 = none */
    bool has_note;                  /* a '#', even with nothing after it:
                                       an empty note clears the last one */
    char note[HC_AGENT_NOTE_MAX + 1];   /* printable ASCII: the text after
                                           the '#' and its blanks, other
                                           bytes as '?', trailing blanks
                                           cut, at most HC_AGENT_NOTE_MAX
                                           bytes (cut there) */
};

/* Parses one line of len bytes (no '\n'; may hold any byte). 0 and *out
 * filled; or -1, *out zeroed (an empty reply: nothing changes) and err set
 * to a one-line message of printable ASCII that names the word:
 *   agent reply: unknown word "fast"
 *   agent reply: bad weight "150%" (0% to 100%)
 *   agent reply: bad maxconn "maxconn:x" (0 to 1000000)
 *   agent reply: two states "up" and "drain"
 * err may be NULL when errlen is 0. */
int hc_agent_parse(const char *line, size_t len, struct hc_agent_reply *out, char *err,
                   size_t errlen);

#endif /* HC_AGENT_H */
