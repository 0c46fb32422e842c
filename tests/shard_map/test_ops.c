/* placeholder until the real test lands */
int main(void) { return 77; }
