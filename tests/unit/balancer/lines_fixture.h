/*
 * lines_fixture.h - a line kind with a field of every type and size of
 * bal_lines.h, bare and keyed, bounds of its own and of its type, and an
 * enum with a hole: what lines_test.c checks case by case and
 * tests/fuzz/fuzz_bal_lines.c at random.
 *
 *   rec 1 web-1 255 u16=1000 4294967295 u64=18446744073709551615 colour=blue 1 17.5
 */
#ifndef LINES_FIXTURE_H
#define LINES_FIXTURE_H

#include "bal_lines.h"

enum colour { RED = 0, GREEN, BLUE };   /* GREEN: not in the table */

struct rec {
    char name[8];
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    enum colour colour;
    bool is_on;
    uint64_t at_ms;
};

static const char *const colours[] = { [RED] = "red", [BLUE] = "blue" };

static const struct bal_line_field fields[] = {
    BAL_LINE_WORD_FIELD("name", struct rec, name),
    BAL_LINE_UINT_FIELD("u8", struct rec, u8, 0, UINT8_MAX),
    BAL_LINE_UINT_FIELD("u16=", struct rec, u16, 2, 1000),
    BAL_LINE_UINT_FIELD("u32", struct rec, u32, 0, UINT32_MAX),
    BAL_LINE_UINT_FIELD("u64=", struct rec, u64, 0, UINT64_MAX),
    BAL_LINE_ENUM_FIELD("colour=", struct rec, colour, colours),
    BAL_LINE_UINT_FIELD("on", struct rec, is_on, 0, 1),
    BAL_LINE_MILLIS_FIELD("at", struct rec, at_ms, UINT64_MAX),
};
static const struct bal_line_kind kind = BAL_LINE_KIND("rec 1", fields);

#endif /* LINES_FIXTURE_H */
