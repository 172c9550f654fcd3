// Matrix transpose of a rows x cols matrix of T (row-major): out[c][r] = in[r][c].
// TILE (from the `tile` axis) is the tile's side; blocks are TILE x ROWS threads, each thread
// moving TILE / ROWS elements.

#define ROWS 8

// Naive: reads coalesced, writes strided by `rows` (uncoalesced).
extern "C" __global__ void transpose_naive(const T* in, T* out, int rows, int cols) {
    const int c = blockIdx.x * TILE + threadIdx.x;
    const int r0 = blockIdx.y * TILE + threadIdx.y;
    for (int r = r0; r < r0 + TILE && c < cols; r += ROWS) {
        if (r < rows) out[(long long)c * rows + r] = in[(long long)r * cols + c];
    }
}

// Tiled: through a shared-memory tile, both global accesses coalesced; the tile's columns hit
// one bank (TILE x TILE of 4-byte words: a column is every TILE-th word).
extern "C" __global__ void transpose_tiled(const T* in, T* out, int rows, int cols) {
    __shared__ T tile[TILE][TILE];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (c < cols && r + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(long long)(r + j) * cols + c];
    }
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;
    r = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (c < rows && r + j < cols) out[(long long)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
    }
}

// Tiled without bank conflicts: one padding column puts a tile column in TILE different banks.
extern "C" __global__ void transpose_padded(const T* in, T* out, int rows, int cols) {
    __shared__ T tile[TILE][TILE + 1];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (c < cols && r + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(long long)(r + j) * cols + c];
    }
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;
    r = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (c < rows && r + j < cols) out[(long long)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
    }
}

// The reference: one thread per element, as plain as it gets.
extern "C" __global__ void transpose_reference(const T* in, T* out, int rows, int cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)rows * cols) {
        const long long r = i / cols, c = i % cols;
        out[c * rows + r] = in[i];
    }
}
