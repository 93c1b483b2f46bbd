#include <stdio.h>
int main(void) { puts("dpgate"); return 0; }
