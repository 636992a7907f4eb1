/* A stand-in for OpenCV 4.5's libopencv_imgcodecs.so.4.5 in the caffe environment (envs/caffe-debian.txt).
 *
 * libcaffe links it for three functions: cv::imread, cv::imdecode and cv::imencode, which only Caffe's image
 * file layers (ImageData, WindowData) and its image-file conversions call. Debian's real library depends on GDAL
 * and about 45 more packages; none of this project's notebooks reads image files through Caffe, so the setup
 * compiles this instead (cc -shared). Should anything call one of them, it stops with this message. */
#include <stdio.h>
#include <stdlib.h>

static void unavailable(const char *function) {
    fprintf(stderr, "caffe environment: OpenCV's %s is not available (envs/caffe-imgcodecs.c)\n", function);
    abort();
}

/* The C++ names libcaffe asks for (g++ mangling of OpenCV 4.5's signatures). */
void imread(void) __asm__("_ZN2cv6imreadERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEi");
void imdecode(void) __asm__("_ZN2cv8imdecodeERKNS_11_InputArrayEi");
void imencode(void) __asm__("_ZN2cv8imencodeERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEERKNS_11_InputArrayERSt6vectorIhSaIhEERKSB_IiSaIiEE");

void imread(void) { unavailable("cv::imread"); }
void imdecode(void) { unavailable("cv::imdecode"); }
void imencode(void) { unavailable("cv::imencode"); }
