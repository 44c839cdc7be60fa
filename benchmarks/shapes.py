"""Layer shapes of real models used by the benchmarks."""


def resnet50_conv_shapes():
    """The 53 convolution weight shapes (K, C, R, S) of ResNet-50 (torchvision layout)."""
    shapes = [(64, 3, 7, 7)]
    cin = 64
    for planes, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            shapes += [(planes, cin, 1, 1), (planes, planes, 3, 3), (planes * 4, planes, 1, 1)]
            if b == 0:
                shapes.append((planes * 4, cin, 1, 1))  # downsample
            cin = planes * 4
    assert len(shapes) == 53
    return shapes
