/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
#ifndef CRITPATH_RECORDING_FORMAT_H
#define CRITPATH_RECORDING_FORMAT_H

#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "recordings are little-endian and records are stored as the kernel wrote them"
#endif

#define REC_MAGIC "CRITPREC"
#define REC_MAGIC_LEN 8
#define REC_FILE_PREFIX 16 /* magic, version, body length */
#define REC_HEADER_BODY_MAX (1u << 20)
#define REC_MAX_CPUS 8192
#define REC_STR_NULL 0xffffffffu /* length of a NULL string */

#define REC_FRAME_MAGIC 0x52465043u /* "CPFR" */
#define REC_FRAME_HDR_SIZE 48
#define REC_TRAILER_MAGIC 0x52545043u /* "CPTR" */
#define REC_TRAILER_SIZE 64

#define REC_FRAME_RAW_TARGET (512u * 1024)
#define REC_FRAME_RAW_MAX (16u << 20)
#ifndef REC_ZSTD_LEVEL
#define REC_ZSTD_LEVEL 1
#endif
/* lz4 frame, crc32 at RF_COMP_CRC (lz4's XXH32 is slow in Debian's build) */
#define REC_FRAME_F_LZ4 0x1u
#define REC_HDR_F_LZ4 0x1u
static inline uint64_t rec_lz4_bound(uint64_t raw)
{
	return raw + raw / 255 + (raw / 65536 + 1) * 24 + 64;
}

static inline void rec_put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}
static inline void rec_put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}
static inline void rec_put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}
static inline uint16_t rec_get16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}
static inline uint32_t rec_get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static inline uint64_t rec_get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* Frame header fields (offsets). */
#define RF_MAGIC 0
#define RF_SEQ 4
#define RF_COMP 8
#define RF_RAW 12
#define RF_COUNT 16
#define RF_FLAGS 20
#define RF_MIN_TS 24
#define RF_MAX_TS 32
#define RF_RESERVED 40 /* zstd frames: 0 */
#define RF_COMP_CRC 40 /* lz4 frames: crc32 of the compressed bytes */
#define RF_CRC 44

/* Trailer fields (offsets). */
#define RT_MAGIC 0
#define RT_FRAMES 4
#define RT_END_NS 8
#define RT_EVENTS 16
#define RT_METADATA 24
#define RT_LOST 32
#define RT_RECORDS 40
#define RT_RESERVED 48
#define RT_CRC 60

#endif /* CRITPATH_RECORDING_FORMAT_H */
