/*
 * bal_lines.h - the one line format of what lb writes down about its
 * servers: the state file (balancer/saved.c) and a hand-over's member,
 * weight and heartbeat lines (lb/reload/members.c, lb/handover/). Pure: a
 * line kind is a table, one formatter and one parser serve every kind.
 *
 *   KEYWORD FIELD FIELD ...            one blank between each, no other
 *   server web web1 10.0.0.1:80 health=up successes=2 ...
 *
 * A field is a value, or key=VALUE when its name ends in '='. Each value
 * has one spelling (no sign, no leading zero, no blank), so that a line
 * lb formats is the line it parses, and an old process's lines, formatted
 * by hand before this table existed, read the same. A field is a member
 * of the caller's record (offsetof), its bounds in its row: the kinds
 * stay next to the structs they fill, in the files that own them.
 *
 * Here rather than in lb/core: balancer/saved.c formats the state file,
 * and balancer/ may not reach into lb/; lb/ links balancer already.
 */
#ifndef BAL_LINES_H
#define BAL_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bal_line_type {
    BAL_LINE_WORD = 0,          /* a char[]: 1 to size - 1 bytes, none of
                                   them a blank or a control byte */
    BAL_LINE_UINT,              /* an unsigned integer (or enum, or bool)
                                   of size 1, 2, 4 or 8: min to max, in
                                   decimal */
    BAL_LINE_ENUM,              /* an enum: names[value], a NULL entry a
                                   value the line does not take */
    BAL_LINE_MILLIS,            /* a uint64_t of milliseconds, written as
                                   seconds with 3 decimals (0 to 3 read) */
};

/* One field: what it is called (in errors; written too when it ends in
 * '='), its type, where it lives in the record and what it accepts. */
struct bal_line_field {
    const char *name;
    enum bal_line_type type;
    size_t offset, size;
    uint64_t min, max;                  /* UINT, MILLIS (in ms) */
    const char *const *names;           /* ENUM, indexed by value */
    size_t nnames;
};

/* A line kind: its keyword (may hold a blank: "lb-state 1") and fields. */
struct bal_line_kind {
    const char *keyword;
    const struct bal_line_field *fields;
    size_t nfields;
};

/* Rows of a kind's table, for member m of struct type st. */
#define BAL_LINE_AT_(st, m) .offset = offsetof(st, m), .size = sizeof(((st *)0)->m)
#define BAL_LINE_WORD_FIELD(name_, st, m)                                   \
    { .name = (name_), .type = BAL_LINE_WORD, BAL_LINE_AT_(st, m) }
#define BAL_LINE_UINT_FIELD(name_, st, m, min_, max_)                       \
    { .name = (name_), .type = BAL_LINE_UINT, BAL_LINE_AT_(st, m),          \
      .min = (min_), .max = (max_) }
#define BAL_LINE_ENUM_FIELD(name_, st, m, names_)                           \
    { .name = (name_), .type = BAL_LINE_ENUM, BAL_LINE_AT_(st, m),          \
      .names = (names_), .nnames = sizeof(names_) / sizeof((names_)[0]) }
#define BAL_LINE_MILLIS_FIELD(name_, st, m, max_ms)                         \
    { .name = (name_), .type = BAL_LINE_MILLIS, BAL_LINE_AT_(st, m),        \
      .max = (max_ms) }
#define BAL_LINE_KIND(keyword_, fields_)                                    \
    { .keyword = (keyword_), .fields = (fields_),                           \
      .nfields = sizeof(fields_) / sizeof((fields_)[0]) }

/* The line of record rec, ending in "\n", into buf (NUL-ended): its
 * length, or 0 when it does not fit in len bytes or a value is not one the
 * kind takes (a name with a blank, a number out of bounds...): lb never
 * writes a line it would not read. */
size_t bal_line_format(char *buf, size_t len, const struct bal_line_kind *k, const void *rec);

/* One line without its "\n" into rec's fields: 0, or -1 with err naming
 * the field and what it takes ("health= must be up, down or warning");
 * the caller adds where the line was. rec's fields may be partly written
 * on -1; the rest of rec is left as it was. */
int bal_line_parse(const char *line, const struct bal_line_kind *k, void *rec, char *err,
                   size_t errlen);

/* Whether line is of kind k (starts with its keyword): to tell kinds
 * apart before parsing. */
bool bal_line_is(const char *line, const struct bal_line_kind *k);

#endif /* BAL_LINES_H */
