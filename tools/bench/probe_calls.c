// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * probe_calls: the target of bench_probe_overhead. Calls one function N
 * times and prints the time a call took. The functions are written in
 * assembly, so their first instructions are the shapes compilers make
 * whatever compiler builds this, and record --probe places its uprobes by
 * them (user/record/tls_at.c):
 *   push_first  push %rbp first (a build with frame pointers)
 *   endbr_push  endbr64, then a push (-fcf-protection: Ubuntu, Fedora)
 *   tail_jump   endbr64, a load, a tail jump (a wrapper)
 *   leaf        endbr64, a load, a test, a branch (a small leaf)
 *   loop_pad    a load, then the nopl that aligns a loop's head
 *   sub_first   sub $8,%rsp first (gcc -O2 before a call): stepped
 *   endbr_sub   endbr64, then the sub: stepped
 * Prints one line:  RESULT shape=S calls=N ns_per_call=X
 *
 *   probe_calls SHAPE [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__asm__(".text\n"
	".globl push_first\n.type push_first,@function\n"
	"push_first:\n\tpush %rbp\n\tmov (%rdi),%eax\n\tpop %rbp\n\tret\n"
	".size push_first,.-push_first\n"
	".globl endbr_push\n.type endbr_push,@function\n"
	"endbr_push:\n\tendbr64\n\tpush %rbp\n\tmov (%rdi),%eax\n\tpop %rbp\n\tret\n"
	".size endbr_push,.-endbr_push\n"
	".globl tail_jump\n.type tail_jump,@function\n"
	"tail_jump:\n\tendbr64\n\tmov (%rdi),%rax\n\tjmp leaf\n"
	".size tail_jump,.-tail_jump\n"
	".globl leaf\n.type leaf,@function\n"
	"leaf:\n\tendbr64\n\tmov (%rdi),%eax\n\ttest %eax,%eax\n\tjne 1f\n\tret\n"
	"1:\tadd $1,%eax\n\tret\n"
	".size leaf,.-leaf\n"
	".globl loop_pad\n.type loop_pad,@function\n"
	"loop_pad:\n\tmov (%rdi),%eax\n\t.byte 0x0f,0x1f,0x44,0x00,0x00\n"
	"2:\tsub $1,%eax\n\tjnz 2b\n\tret\n"
	".size loop_pad,.-loop_pad\n"
	".globl sub_first\n.type sub_first,@function\n"
	"sub_first:\n\tsub $8,%rsp\n\tmov (%rdi),%eax\n\tadd $8,%rsp\n\tret\n"
	".size sub_first,.-sub_first\n"
	".globl endbr_sub\n.type endbr_sub,@function\n"
	"endbr_sub:\n\tendbr64\n\tsub $8,%rsp\n\tmov (%rdi),%eax\n\tadd $8,%rsp\n\tret\n"
	".size endbr_sub,.-endbr_sub\n");

long push_first(const int *), endbr_push(const int *), tail_jump(const int *), leaf(const int *),
    loop_pad(const int *), sub_first(const int *), endbr_sub(const int *);

static const struct {
	const char *name;
	long (*fn)(const int *);
} shapes[] = {
    {"push_first", push_first}, {"endbr_push", endbr_push}, {"tail_jump", tail_jump},
    {"leaf", leaf},		{"loop_pad", loop_pad},		{"sub_first", sub_first},
    {"endbr_sub", endbr_sub},
};

int main(int argc, char **argv)
{
	long (*fn)(const int *) = NULL;
	long n = argc > 2 ? atol(argv[2]) : 100000, sum = 0;
	static const int arg[2] = {1, 0};
	struct timespec a, b;

	for (size_t i = 0; argc > 1 && i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(argv[1], shapes[i].name))
			fn = shapes[i].fn;
	if (!fn || n <= 0) {
		fprintf(stderr, "usage: probe_calls SHAPE [N]  (SHAPE: push_first, endbr_push, "
				"tail_jump, leaf, loop_pad, sub_first, endbr_sub)\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		sum += fn(arg);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("RESULT shape=%s calls=%ld ns_per_call=%.1f sum=%ld\n", argv[1], n,
	       ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n,
	       sum);
	return 0;
}
