/* tests/cuda_emu.h: the host emulation of CUDA kernels, shared by the tests
 * of generated kernels (test_cuda_codegen.c) and of the sort module
 * (test_cuda_sort.c).
 *
 * CUDA text written for NVRTC is compiled as host C++ against a small shim
 * (threadIdx/blockIdx per OS thread, __shared__ as one static copy per block
 * run, __syncthreads as a pthread barrier, atomicAdd as an atomic) and run
 * over host memory, block after block, one OS thread per CUDA thread. The
 * text must declare `lf_args`, the one by-value parameter of its entries.
 * It checks the kernels' logic (indexing, grid-stride loops, block trees,
 * scans); it cannot check what only a GPU shows (warp scheduling, memory
 * model, device math accuracy).
 */
#ifndef LF_TEST_CUDA_EMU_H
#define LF_TEST_CUDA_EMU_H

/* Runs entry fn (from dlsym on an emu_build handle) over grid blocks of
 * bx * by threads (at most 1024) with the lf_args words; returns 0, or < 0
 * when the threads cannot be made. */
typedef int (*emu_launch_fn)(void *fn, unsigned grid, unsigned bx, unsigned by, const void *words);

/* Compiles the emulated module of CUDA text src in folder dir (files named
 * by id, removed again) and dlopens it; the handle has every entry of src
 * and "lf_emu_launch" (an emu_launch_fn). Fails the test on error. */
void *emu_build(const char *src, const char *dir, int id);

#endif
