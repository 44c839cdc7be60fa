# ruff: noqa: E741  (O, I: the field's names for output / input channels)
"""Transcriptions of clDNN's OpenCL index functions (fetch_data.cl / fetch_weights.cl) as pitch
arithmetic, written from docs/openvino.md (sections 4, 5, 7 and 11) — independent of the engine
and of the mixed-radix reference. Each returns the element offset for arrays of indices."""


def cdiv(a, b):
    return -(-a // b)


def b_fs_yx_fsv(b, f, y, x, size, lo, hi, fsv):
    """get_b_fs_yx_fsv_index: padding before blocking."""
    B, F, Y, X = size
    xp, yp = lo[3] + X + hi[3], lo[2] + Y + hi[2]
    fp = lo[1] + F + hi[1]
    x_pitch, y_pitch = fsv, fsv * xp
    fs_pitch = y_pitch * yp
    b_pitch = fs_pitch * cdiv(fp, fsv)
    ff = f + lo[1]
    return (b + lo[0]) * b_pitch + (ff // fsv) * fs_pitch + (y + lo[2]) * y_pitch + (x + lo[3]) * x_pitch + ff % fsv


def bs_fs_zyx_bsv_fsv(b, f, z, y, x, size, lo, hi, bsv, fsv):
    """get_bs_fs_zyx_bsv_fsv_index."""
    B, F, Z, Y, X = size
    bp, fp = b + lo[0], f + lo[1]
    x_pitch = bsv * fsv
    y_pitch = x_pitch * (lo[4] + X + hi[4])
    z_pitch = y_pitch * (lo[3] + Y + hi[3])
    fs_pitch = z_pitch * (lo[2] + Z + hi[2])
    bs_pitch = fs_pitch * cdiv(lo[1] + F + hi[1], fsv)
    return ((bp // bsv) * bs_pitch + (fp // fsv) * fs_pitch + (z + lo[2]) * z_pitch + (y + lo[3]) * y_pitch +
            (x + lo[4]) * x_pitch + (bp % bsv) * fsv + fp % fsv)


def fs_b_yx_fsv32(b, f, y, x, size, lo, hi):
    """get_fs_b_yx_fsv32_index (no batch padding)."""
    B, F, Y, X = size
    fp = f + lo[1]
    x_pitch = 32
    y_pitch = 32 * (lo[3] + X + hi[3])
    b_pitch = y_pitch * (lo[2] + Y + hi[2])
    fs_pitch = b_pitch * B
    return (fp // 32) * fs_pitch + b * b_pitch + (y + lo[2]) * y_pitch + (x + lo[3]) * x_pitch + fp % 32


def _os_is_block_offset(o, i, z, y, x, size, isv, osv):
    """Pitches shared by the [o/osv][i/isv][z][y][x][block] functions: offset of the block."""
    O, I, Z, Y, X = size
    x_pitch = isv * osv
    y_pitch, z_pitch = x_pitch * X, x_pitch * X * Y
    is_pitch = z_pitch * Z
    os_pitch = is_pitch * cdiv(I, isv)
    return (o // osv) * os_pitch + (i // isv) * is_pitch + z * z_pitch + y * y_pitch + x * x_pitch


def os_is_zyx_isv_osv(o, i, z, y, x, size, isv, osv):
    """get_os_is_zyx_isv_osv_index: [o/osv][i/isv][z][y][x][i%isv][o%osv]."""
    return _os_is_block_offset(o, i, z, y, x, size, isv, osv) + (i % isv) * osv + o % osv


def os_is_zyx_osv_isv(o, i, z, y, x, size, osv, isv):
    """get_os_is_zyx_osv_isv_index: [o/osv][i/isv][z][y][x][o%osv][i%isv]."""
    return _os_is_block_offset(o, i, z, y, x, size, isv, osv) + (o % osv) * isv + i % isv


def g_os_is_zyx_isa_osv_isv(g, o, i, z, y, x, size, isa, osv, isv):
    """get_g_os_is_zyx_isa_osv_isv_index: [g][o/osv][i/(isa*isv)][z][y][x][(i/isv)%isa][o%osv][i%isv]
    with the allocation rule (aligned I) for the slice pitch (docs/openvino.md §7, item 5)."""
    G, O, I, Z, Y, X = size
    block = isa * osv * isv
    y_pitch, z_pitch = block * X, block * X * Y
    is_pitch = z_pitch * Z
    os_pitch = is_pitch * cdiv(I, isa * isv)
    g_pitch = os_pitch * cdiv(O, osv)
    return (g * g_pitch + (o // osv) * os_pitch + (i // (isa * isv)) * is_pitch + z * z_pitch + y * y_pitch +
            x * block + ((i // isv) % isa) * osv * isv + (o % osv) * isv + i % isv)


def os_is_zyx_osa4_isa8_osv8_isv4(o, i, z, y, x, size, swizzled):
    """get_g_os_is_yx_osa4_isa8_osv8_isv4 and its swizzled_by_4 variant: 32x32 blocks."""
    O, I, Z, Y, X = size
    y_pitch, z_pitch = 1024 * X, 1024 * X * Y
    is_pitch = z_pitch * Z
    os_pitch = is_pitch * cdiv(I, 32)
    ob, ib = o % 32, i % 32
    if swizzled:
        inner = (ob % 4) * 256 + ((ib // 4) % 8) * 32 + ((ob // 4) % 8) * 4 + ib % 4
    else:
        inner = ((ob // 8) % 4) * 256 + ((ib // 4) % 8) * 32 + (ob % 8) * 4 + ib % 4
    return (o // 32) * os_pitch + (i // 32) * is_pitch + z * z_pitch + y * y_pitch + x * 1024 + inner


def os_is_yx_osv32_isv4_swizzled_by_2(o, i, y, x, size):
    O, I, Y, X = size
    y_pitch = 128 * X
    is_pitch = y_pitch * Y
    os_pitch = is_pitch * cdiv(I, 4)
    ob = o % 32
    return ((o // 32) * os_pitch + (i // 4) * is_pitch + y * y_pitch + x * 128 +
            (ob % 2) * 64 + ((ob // 2) % 16) * 4 + i % 4)


def os_zyxi_osv16(o, i, z, y, x, size):
    """get_os_zyxi_osv16_index: [o/16][z][y][x][i][o%16]."""
    O, I, Z, Y, X = size
    x_pitch = 16 * I
    y_pitch, z_pitch = x_pitch * X, x_pitch * X * Y
    os_pitch = z_pitch * Z
    return (o // 16) * os_pitch + z * z_pitch + y * y_pitch + x * x_pitch + i * 16 + o % 16


def gs_oi_yxs_gsv_yxsv4(g, y, x, size, gsv):
    """get_gs_oi_yxs_gsv_yxsv4_index for O = I = 1: yx = y*X + x."""
    G, O, I, Y, X = size
    yx = y * X + x
    yxs_pitch = gsv * 4
    gs_pitch = yxs_pitch * cdiv(Y * X, 4)
    return (g // gsv) * gs_pitch + (yx // 4) * yxs_pitch + (g % gsv) * 4 + yx % 4


def g_os_zyx_is_osv_isv(g, o, i, z, y, x, size, osv, isv):
    """get_g_os_zyx_is_osv_isv_index: [g][o/osv][z][y][x][i/isv][o%osv][i%isv]."""
    G, O, I, Z, Y, X = size
    is_pitch = osv * isv
    x_pitch = is_pitch * cdiv(I, isv)
    y_pitch, z_pitch = x_pitch * X, x_pitch * X * Y
    os_pitch = z_pitch * Z
    g_pitch = os_pitch * cdiv(O, osv)
    return (g * g_pitch + (o // osv) * os_pitch + z * z_pitch + y * y_pitch + x * x_pitch + (i // isv) * is_pitch +
            (o % osv) * isv + i % isv)


def is_os_yx_osa8_isv16_osv4(o, i, y, x, size):
    """get_is_os_yx_osa8_isv16_osv4_index: [i/16][o/32][y][x][(o/4)%8][i%16][o%4]."""
    O, I, Y, X = size
    block = 32 * 16
    y_pitch = block * X
    os_pitch = y_pitch * Y
    is_pitch = os_pitch * cdiv(O, 32)
    return ((i // 16) * is_pitch + (o // 32) * os_pitch + y * y_pitch + x * block + ((o // 4) % 8) * 64 +
            (i % 16) * 4 + o % 4)
