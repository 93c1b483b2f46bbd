/*
 * trn_test_conv.h: the convolutional net the float64 and float32 gradient
 * tests share, so that both check their passes on the same architecture.
 */
#ifndef TRN_TEST_CONV_H
#define TRN_TEST_CONV_H

#include "trn.h"

/* Two convolutions (3x3 to 4 channels, 5x5 to 6), a hidden layer of 10,
 * 3 classes, on 2 x 8 x 8 inputs, with activation act; its tempered
 * sigmoid has scale 3, temperature 0.7 and offset 1 (tanh ignores them). */
trn_conv_spec trn_test_conv_spec(trn_conv_act act);

/* A net of spec s initialised from rng, then every parameter the
 * initialisation left zero (the biases) set to 0.1 times a normal draw,
 * so that their gradients are exercised too.  A refused spec fails the
 * running test; the caller frees the net. */
trn_convnet *trn_test_conv_net(const trn_conv_spec *s, mech_rng *rng);

#endif
