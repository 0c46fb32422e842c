/*
 * The canonical reduction order (README "Reduction order"): the one place that defines it.
 *
 * A reduction over n positions (a group's axis_index, or an axis_index_groups group's member
 * order) adds in a fixed binary tree over the positions, whatever processes and threads hold
 * them. With p2 the largest power of two <= n and rem = n - p2, the tree has p2 leaves: leaf i
 * is x[2i] + x[2i + 1] for i < rem, else x[i + rem]; above them, node j of level k (covering
 * leaves j * 2^k .. (j + 1) * 2^k - 1) is node 2j of level k - 1 plus node 2j + 1. The result is
 * the node of level log2(p2). Adding in this order needs only the children's values, so a
 * process that holds an aligned block of 2^b positions adds it alone, and processes combine
 * their blocks by recursive doubling over the same tree.
 */
#ifndef SPMD_RUNTIME_TREE_H
#define SPMD_RUNTIME_TREE_H

#ifdef __CUDACC__ /* the kernels add in the same order */
#define SPMD__TREE_HD __host__ __device__
#else
#define SPMD__TREE_HD
#endif

typedef struct spmd__tree {
    int n;      /* positions */
    int p2;     /* leaves: the largest power of two <= n */
    int rem;    /* leaves that are pairs of positions */
    int levels; /* log2(p2): the root's level */
} spmd__tree;

static inline SPMD__TREE_HD spmd__tree spmd__tree_of(int n)
{
    spmd__tree t = {n, 1, 0, 0};
    while (t.p2 * 2 <= n) {
        t.p2 *= 2;
        t.levels++;
    }
    t.rem = n - t.p2;
    return t;
}

/* The leaf that holds position pos. */
static inline SPMD__TREE_HD int spmd__tree_leaf_of(const spmd__tree *t, int pos)
{
    return pos < 2 * t->rem ? pos / 2 : pos - t->rem;
}

/* The first position of leaf i; it holds 2 positions for i < rem, else 1. */
static inline SPMD__TREE_HD int spmd__tree_leaf_first(const spmd__tree *t, int i)
{
    return i < t->rem ? 2 * i : i + t->rem;
}

static inline SPMD__TREE_HD int spmd__tree_leaf_size(const spmd__tree *t, int i)
{
    return i < t->rem ? 2 : 1;
}

#endif /* SPMD_RUNTIME_TREE_H */
